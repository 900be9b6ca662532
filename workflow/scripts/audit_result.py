from cotdyn.files.arrow_memory import free_arrow_memory

free_arrow_memory()  # before the audit imports pyarrow (cotdyn.files.arrow_memory says why)

from cotdyn.audit.result import write_audit_result  # noqa: E402
from cotdyn.files.logs import tee_to  # noqa: E402

tee_to(snakemake.log[0])
result = write_audit_result(
    snakemake.params.study_dir,
    snakemake.input.plan,
    snakemake.output[0],
    snakemake.params.cache,
)
print(f"audit: {'PASS' if result['ok'] else 'FAIL'} {result['counts']}")
