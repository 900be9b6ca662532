from cotdyn.files.logs import tee_to
from cotdyn.provenance.manifests import write_study_manifest
from cotdyn.provenance.plugins import study_plugins

tee_to(snakemake.log[0])
config = dict(snakemake.params.config)
manifest = write_study_manifest(
    snakemake.params.study_dir, snakemake.params.study, config, snakemake.params.plan, plugins=study_plugins(config)
)
print(f"{len(manifest['files'])} files hashed")
