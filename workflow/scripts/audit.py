import sys
from collections import Counter

from cotdyn.audit.check import audit, write_report
from cotdyn.files.logs import tee_to
from cotdyn.provenance.integrity import EXTRA, MISMATCH, MISSING

tee_to(snakemake.log[0])
# the plan and the cache of the reviewer's own config: trusted, unlike the study's manifest
report = audit(snakemake.params.study_dir, snakemake.params.plan, cache=snakemake.params.cache)
print(report.text())
write_report(report, snakemake.params.report, within=snakemake.params.study_dir)
if not report.ok:
    # counted by status, as the CLI's report names them: extra files (issue 52) are failures too
    counts = Counter(f.status for f in report.failures)
    named = ", ".join(f"{counts[s]} {s}" for s in (MISMATCH, MISSING, EXTRA) if counts[s]) or "no file"
    sys.exit(f"audit failed: {named} ({len(report.failures)} file(s)), {len(report.problems)} problem(s)")
