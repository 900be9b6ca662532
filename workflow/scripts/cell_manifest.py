from cotdyn.files.logs import tee_to
from cotdyn.provenance.manifests import write_cell_manifest
from cotdyn.provenance.plugins import plugin_packages

tee_to(snakemake.log[0])
config = dict(snakemake.params.config)
write_cell_manifest(
    snakemake.params.spec,
    dict(snakemake.params.protocols),
    dict(snakemake.params.generation),
    snakemake.input.problems,
    snakemake.params.plan,
    config,
    snakemake.input.plan_check,
    snakemake.output[0],
    plugin_packages=plugin_packages(config),
)
