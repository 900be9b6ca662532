from cotdyn.audit.result import write_audit_result
from cotdyn.files.logs import tee_to

tee_to(snakemake.log[0])
result = write_audit_result(
    snakemake.params.study_dir,
    snakemake.input.plan,
    snakemake.output[0],
    snakemake.params.cache,
    processes=snakemake.threads,
)
print(f"audit: {'PASS' if result['ok'] else 'FAIL'} {result['counts']}")
