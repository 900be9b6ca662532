import sys

from cotdyn.audit.check import audit, write_report
from cotdyn.files.logs import tee_to

tee_to(snakemake.log[0])
report = audit(snakemake.params.study_dir, snakemake.params.plan)
print(report.text())
write_report(report, snakemake.params.report)
if not report.ok:
    sys.exit(f"audit failed: {len(report.failures)} file(s) mismatching or missing, {len(report.problems)} problem(s)")
