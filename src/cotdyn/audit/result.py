"""The full audit's result as the report shows it (``cotdyn.provenance.integrity.summary`` of
``cotdyn.audit.check.audit``), written to the study's audit result file."""

from __future__ import annotations

from pathlib import Path

from cotdyn.audit.check import audit
from cotdyn.files.writers import write_json
from cotdyn.provenance.integrity import summary


def audit_result(study_dir, plan_path=None, cache=None) -> dict:
    """The full audit (re-derivation and hashes, cotdyn.audit.check.audit) as the report shows it."""
    study_dir = Path(study_dir)
    return summary(
        # the pages are rendered from this result, after it, so it cannot vouch for them; which of
        # them exist while it runs depends on the order of jobs
        study_dir,
        audit(study_dir, plan_path, cache=cache, pages=False),
        "audit: re-derived from samples and chains, hashed",
    )


def write_audit_result(study_dir, plan_path, out, cache=None) -> dict:
    """The audit's result, written to ``out`` inside the study, never through a link in it."""
    result = audit_result(study_dir, plan_path, cache)
    write_json(result, out, within=study_dir)
    return result
