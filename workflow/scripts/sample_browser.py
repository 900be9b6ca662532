from cotdyn.files.logs import tee_to
from cotdyn.provenance.seal import check_sealed
from cotdyn.report.sample_browser import cell_view, write_sample_browser

tee_to(snakemake.log[0])
inputs = zip(snakemake.params.cells, snakemake.input.chains, snakemake.input.samples, snakemake.input.records,
             snakemake.input.problems, snakemake.params.samples_files)  # fmt: skip
views = {}
for cell, chains, samples, records, problems, where in inputs:
    check_sealed(chains)  # shown only from what generation wrote (cotdyn.provenance.seal)
    check_sealed(samples)
    views[cell] = cell_view(chains, samples, records, problems, snakemake.params.protocol, where)
print(write_sample_browser(snakemake.wildcards.variant, views, snakemake.params.protocol, snakemake.output[0]))
