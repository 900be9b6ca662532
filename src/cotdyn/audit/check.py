"""The reviewer's audit (docs/reference.md section 7): re-derive every analysis output and compare hashes.

From the stored generations alone (chains.parquet, samples.parquet) and the study manifest's
config, the audit re-extracts every continuation's answer from its text, re-derives records,
summaries, the plan check and the registered analysis in a scratch directory, and compares each
file's sha256 with the manifest and with the file on disk. It also re-checks the plan's
registered hash and lists every undeclared deviation. CPU only; no model weights.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from cotdyn.audit.derive import (  # noqa: F401  (the workflow's rules import these from here)
    benchmark_hash_problems,
    derive_analysis,
    rederive,
    write_plan_check,
)
from cotdyn.audit.derive_outputs import derive_grading
from cotdyn.audit.diff import changed_rows
from cotdyn.audit.expected import expected_checks, expected_files
from cotdyn.audit.pages import check_pages
from cotdyn.audit.raw import apply_raw_checks, raw_checks
from cotdyn.audit.registration import power_check, registration_check, seeds_honoured, time_lock_status
from cotdyn.audit.untrusted import Admitted, Refused, admit
from cotdyn.audit.view import study_view
from cotdyn.files.layout import PLAN_CHECK
from cotdyn.files.terminal import printable
from cotdyn.files.writers import write_json
from cotdyn.plan.config import ConfigError, limited_scope, study_limit
from cotdyn.plan.load import plan_sha256
from cotdyn.plan.registration import PreregistrationError
from cotdyn.plan.timelock import plan_version
from cotdyn.provenance.integrity import MATCH, MISMATCH, MISSING, UNLISTED, AuditReport, FileCheck
from cotdyn.provenance.manifests import config_sha256, output_hashes

# --- the report ------------------------------------------------------------------------------


# Analysis outputs the audit does not re-derive: information gain on the study's traces (a LoRA
# supervisor and ORMs trained per cell, seed 000 section 3.4; too costly for the audit's CPU run).
# The audit checks their stored hashes only (their line says "stored", not "re-derived").
HASH_CHECKED_ONLY = ("infogain/traces/",)
# what a re-derivation may raise on a study's data: a named FAIL, not a traceback
DERIVATION_ERRORS = (ConfigError, PreregistrationError, ValueError, KeyError, TypeError, OSError)


def is_derived(path: str) -> bool:
    """Whether a study file is a function of the stored generations, plan and config that the
    audit re-derives, rather than a stored generation, a record of the run, or an output whose
    hash alone is checked."""
    if any(part in path for part in HASH_CHECKED_ONLY):
        return False
    return (
        path == PLAN_CHECK
        or path.startswith("analysis/")
        or (path.startswith("cells/") and path.endswith(("/records.parquet", "/summary.json", "/samples.jsonl")))
    )


def compare_files(
    listed: dict[str, str], stored: dict[str, str], derived: dict[str, str], expected: dict[str, str] | None = None
) -> list[FileCheck]:
    """Per file: the manifest's hash against the file on disk and, where the audit re-derived it,
    against the re-derivation. Re-derived files the manifest lacks fail, and so do derived files
    the audit could not re-derive. ``expected``: the files the DAG writes for the study's config
    (cotdyn.audit.expected), each required on disk and in the manifest, and none other in the
    folders the DAG alone writes; other files on disk but not in the manifest are listed, not failed."""
    checks = []
    for path in sorted(set(listed) | set(stored) | set(derived)):
        want = listed.get(path)
        if want is not None and is_derived(path) and path not in derived:
            checks.append(FileCheck(path, MISSING, "could not be re-derived from samples and chains"))
        elif want is None:
            if path in derived:
                checks.append(FileCheck(path, MISSING, "re-derived, but the manifest does not list it"))
            else:
                checks.append(FileCheck(path, UNLISTED, "not in the manifest; not audited"))
        elif path not in stored:
            checks.append(FileCheck(path, MISSING, "listed in the manifest, absent from the study"))
        elif stored[path] != want:
            checks.append(FileCheck(path, MISMATCH, f"stored sha256 {stored[path]} != manifest {want}"))
        elif path in derived and derived[path] != want:
            checks.append(
                FileCheck(
                    path, MISMATCH, f"re-derived from samples and chains: sha256 {derived[path]} != manifest {want}"
                )
            )
        else:
            checks.append(FileCheck(path, MATCH, "re-derived" if path in derived else "stored"))
    return checks if expected is None else expected_checks(checks, expected, listed, stored)


def plan_problems(study: Admitted) -> list[str]:
    """The plan against the hash the study ran under, and the manifest's config against its hash
    (the plan against REGISTERED: cotdyn.audit.registration)."""
    problems = []
    found, ran = plan_sha256(study.plan_path), study.manifest["plan_sha256"]
    if found != ran:
        problems.append(f"{study.plan_path} has sha256 {found}, the study ran under {printable(ran)}")
    found = config_sha256(study.manifest["config"])
    if found != study.manifest["config_sha256"]:
        problems.append(
            f"manifest config hashes to {found}, manifest says {printable(study.manifest['config_sha256'])}"
        )
    return problems


def failed(e: Exception) -> str:
    return f"re-derivation failed: {type(e).__name__}: {printable(str(e))[:500]}"


def audit(
    study_dir, plan_path=None, scratch=None, cache=None, pages: bool = True, tsa_ca=None, power: bool = False
) -> AuditReport:
    """Audit a finished study directory against its manifest (see the module docstring). The
    folder is admitted once (cotdyn.audit.untrusted: links, manifest, config, plan and its lock,
    cells, cache) and read after only through the view built on that admission (cotdyn.audit.view:
    each raw file bounded and its seal checked before it is parsed); a refusal is a named FAIL.
    ``cache``: the generation cache the reviewer names (default: the config's, when it lies in the
    folders the audit trusts); ``tsa_ca``: the timestamp authority's CA certificate the reviewer
    trusts (cotdyn.audit.registration); ``power``: recompute the plan's power table
    (minutes at panel scale; without it its stored file is checked against REGISTERED's hash)."""
    study_dir = Path(study_dir)
    report = AuditReport(str(study_dir))
    try:
        study = admit(study_dir, plan_path, cache)
    except Refused as e:
        report.problems.append(str(e))
        return report
    view = study_view(study_dir, study.entries, list(study.raw))  # every later read of the study goes through it
    cells, protocols = study.cells, study.protocols
    limit = study_limit(study.config)
    report.scope = limited_scope(limit) if limit else None
    report.registration, earlier, problems = registration_check(study.plan_path, study.plan, view, tsa_ca)
    report.problems += problems + plan_problems(study)
    words, problems = power_check(study.plan_path, study.plan, power)
    report.registration += f"; {words}" if words else ""
    report.problems += problems
    with tempfile.TemporaryDirectory(prefix="cotdyn-audit-") as tmp:
        derived_dir = (Path(scratch) if scratch else Path(tmp)) / "derived"
        problems = []
        try:
            rederive(view, derived_dir, study, problems)
        except DERIVATION_ERRORS as e:
            problems.append(failed(e))
        try:  # the grading page too where the analysis could not be re-derived
            derive_grading(view, derived_dir, study.config, cells, protocols)
        except DERIVATION_ERRORS as e:
            problems.append(failed(e))
        seeds: dict[str, tuple[int, str | None]] = {}  # checked with the raw files: their requests read once
        models = {name: spec.model_key for name, spec in cells.items()}
        checked = raw_checks(view, study.raw, protocols, study.cache_dir, study.cache_note, models, seeds,
                             seeds_honoured(cells))  # fmt: skip
        lock = [seeds[path][1] for path in sorted(seeds) if seeds[path][1]]  # in the raw files' path order
        report.problems += lock + problems
        report.time_lock = time_lock_status(
            protocols, sum(rows for rows, _ in seeds.values()), lock, earlier, plan_version(study.plan)
        )
        derived = {p: h for p, h in output_hashes(derived_dir).items() if not p.startswith("generations/")}
        listed, expected = study.manifest["files"], expected_files(study.config, study.plan, cells, protocols)
        compared = compare_files(listed, view.hashes, derived, expected)
        report.files = [with_changed_rows(f, study_dir, derived_dir) for f in compared]
        if pages:  # the report pages, re-rendered (not by the run's own audit, whose result they show)
            report.files = check_pages(report.files, view, derived_dir)
    # a study target the manifest lacks is one of the expected files (audit.expected), failed there
    report.files = apply_raw_checks(report.files, checked)
    return report


def with_changed_rows(check: FileCheck, study_dir: Path, derived_dir: Path) -> FileCheck:
    """A mismatching file that the audit re-derived, with the rows that differ named in its detail."""
    stored, derived = study_dir / check.path, derived_dir / check.path
    if check.status != MISMATCH or not stored.exists() or not derived.exists():
        return check
    rows = changed_rows(stored, derived)
    return FileCheck(check.path, check.status, f"{check.detail}; {rows}") if rows else check


def write_report(report: AuditReport, path, within=None) -> None:
    """The report as JSON at ``path``; ``within``: the study folder it lies in, never written
    through a link there (cotdyn.files.writers.write_bytes)."""
    write_json(report.as_dict(), path, within)
