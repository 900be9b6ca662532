import sys

from cotdyn.audit.check import audit, write_report
from cotdyn.files.logs import tee_to

tee_to(snakemake.log[0])
# the plan and the cache of the reviewer's own config: trusted, unlike the study's manifest
report = audit(snakemake.params.study_dir, snakemake.params.plan, cache=snakemake.params.cache)
print(report.text())
write_report(report, snakemake.params.report, within=snakemake.params.study_dir)
if not report.ok:
    sys.exit(f"audit failed: {len(report.failures)} file(s) mismatching or missing, {len(report.problems)} problem(s)")
