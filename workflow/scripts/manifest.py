from cotdyn.files.logs import tee_to
from cotdyn.provenance.manifests import write_study_manifest

tee_to(snakemake.log[0])
manifest = write_study_manifest(
    snakemake.params.study_dir, snakemake.params.study, dict(snakemake.params.config), snakemake.params.plan
)
print(f"{len(manifest['files'])} files hashed")
