from cotdyn.files.logs import tee_to
from cotdyn.records.derive import derive_records

tee_to(snakemake.log[0])
derive_records(
    snakemake.input.chains,
    snakemake.input.samples,
    snakemake.params.protocol,
    snakemake.params.exclusion,
    snakemake.params.benchmark,
    snakemake.wildcards.cell,
    snakemake.output.records,
    snakemake.output.summary,
    problems_path=snakemake.input.problems,
)
