from cotdyn.files.logs import tee_to
from cotdyn.provenance.seal import check_sealed
from cotdyn.records.derive import derive_records

tee_to(snakemake.log[0])
# derive only from what generation wrote (cotdyn.provenance.seal)
check_sealed(snakemake.input.chains)
check_sealed(snakemake.input.samples)
derive_records(
    snakemake.input.chains,
    snakemake.input.samples,
    snakemake.params.protocol,
    snakemake.params.exclusion,
    snakemake.params.benchmark,
    snakemake.wildcards.cell,
    snakemake.output.records,
    snakemake.output.summary,
    groups=snakemake.params.groups,
    cut_answers=snakemake.params.cut_answers,
    problems_path=snakemake.input.problems,
    signals=snakemake.params.signals,
)
