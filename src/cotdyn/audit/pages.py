"""The report pages under the audit: each variant's header and registered results page is
re-rendered from the re-derived analysis (hypotheses.json, the plan check) and compared byte for
byte with the page in the study, so a verdict edited on a page fails the audit. Every other file
under report/ is named as one the audit does not vouch for.

A page's integrity section quotes the study's report/audit.json and the stored files' check; the
re-rendering reads the same, so an untouched study's pages match.
"""

from __future__ import annotations

import json
from pathlib import Path

from cotdyn.files.layout import AUDIT_RESULT, PLAN_CHECK, REPORT_DIR, REPORT_PAGES, analysis_file
from cotdyn.files.strict import UntrustedFileError, read_bytes, read_json
from cotdyn.provenance.integrity import MATCH, MISMATCH, MISSING, UNLISTED, FileCheck, stored_check

MAX_PAGE_BYTES = 64 << 20  # a report page: tens of kB
MAX_RESULT_BYTES = 64 << 20  # report/audit.json: a line per file of the study

NOT_VOUCHED = "a report file the audit does not re-render: not vouched for"


def page_variant(path: str) -> tuple[str, str] | None:
    """(variant, page) of a report page's path, None for any other file."""
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == REPORT_DIR and parts[2] in REPORT_PAGES:
        return parts[1], parts[2]
    return None


def rendered(study_dir: Path, derived_dir: Path, variant: str, page: str, stored: dict) -> bytes:
    """The page as the report writes it, from the re-derived analysis and the study's audit result."""
    from cotdyn.report.header import header_bytes
    from cotdyn.report.pages import registered_results_html

    hypotheses = derived_dir / analysis_file(variant, "hypotheses.json")
    audit = study_dir / AUDIT_RESULT
    audit = audit if audit.is_file() else None
    # the study's audit result, strictly (cotdyn.files.strict): a refusal is a ValueError naming it
    audit_result = read_json(audit, max_bytes=MAX_RESULT_BYTES) if audit else None
    if page == "header.html":
        return header_bytes(variant, hypotheses, derived_dir / PLAN_CHECK, audit, stored)
    result = json.loads(hypotheses.read_text())
    return registered_results_html(variant, result, audit_result, stored)


def first_difference(ours: bytes, theirs: bytes) -> str:
    for line, (a, b) in enumerate(zip(ours.splitlines(), theirs.splitlines()), 1):
        if a != b:
            return f"line {line} differs"
    return "lengths differ"


def page_check(study_dir: Path, derived_dir: Path, path: str, stored: dict) -> FileCheck:
    variant, page = page_variant(path)
    if not (derived_dir / analysis_file(variant, "hypotheses.json")).is_file():
        return FileCheck(path, MISSING, "report page of a variant the audit did not re-derive")
    try:
        ours = rendered(study_dir, derived_dir, variant, page, stored)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return FileCheck(path, MISMATCH, f"could not be re-rendered ({type(e).__name__}: {str(e)[:200]})")
    try:
        theirs = read_bytes(study_dir / path, max_bytes=MAX_PAGE_BYTES)
    except UntrustedFileError as e:
        return FileCheck(path, MISMATCH, f"not read ({e})")
    if ours != theirs:
        detail = f"re-rendered from the re-derived analysis, the page differs ({first_difference(ours, theirs)})"
        return FileCheck(path, MISMATCH, detail)
    return FileCheck(path, MATCH, "re-rendered from the re-derived analysis")


def report_files(study_dir: Path) -> list[str]:
    """Every file under the study's report/ (which the manifest leaves out), by relative path."""
    folder = study_dir / REPORT_DIR
    found = sorted(folder.rglob("*")) if folder.is_dir() and not folder.is_symlink() else []
    return [f.relative_to(study_dir).as_posix() for f in found if f.is_file() and not f.is_symlink()]


def check_pages(files: list[FileCheck], study_dir, derived_dir) -> list[FileCheck]:
    """The audit's file checks, followed by the report pages re-rendered and compared and the rest
    of report/ named as not vouched for."""
    study_dir, derived_dir = Path(study_dir), Path(derived_dir)
    paths = [p for p in report_files(study_dir) if p not in {f.path for f in files}]
    stored = stored_check(study_dir) if any(page_variant(p) for p in paths) else None
    return files + [
        page_check(study_dir, derived_dir, p, stored) if page_variant(p) else FileCheck(p, UNLISTED, NOT_VOUCHED)
        for p in paths
    ]
