from cotdyn.files.logs import tee_to
from cotdyn.provenance.manifests import write_cell_manifest

tee_to(snakemake.log[0])
write_cell_manifest(
    snakemake.params.spec,
    dict(snakemake.params.protocols),
    dict(snakemake.params.generation),
    snakemake.input.problems,
    snakemake.params.plan,
    dict(snakemake.params.config),
    snakemake.input.plan_check,
    snakemake.output[0],
)
