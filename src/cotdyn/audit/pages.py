"""The report pages under the audit: each variant's header and registered results page is
re-rendered from the re-derived analysis (hypotheses.json, the plan check) and compared byte for
byte with the page in the study, so a verdict edited on a page fails the audit; the grading page
and its tables, and each variant's sample browser (report/samples/), are re-derived from the raw
files (cotdyn.audit.derive_outputs) and compared the same way. The pages among the analysis
files (exploratory tables, sweeps, seed 003's tables) are re-derived and compared by check.py's
comparison. A page the audit does not re-render (any file a browser runs as a page:
PAGE_SUFFIXES) fails, refused: opened, it would run whatever it holds.
Every other file under report/ is named as one the audit does not vouch for.

A page's integrity section quotes the study's report/audit.json and the stored files' check; the
re-rendering reads the same, so an untouched study's pages match.
"""

from __future__ import annotations

import json
from pathlib import Path

from cotdyn.audit.view import StudyView
from cotdyn.files.layout import AUDIT_RESULT, PLAN_CHECK, REPORT_DIR, REPORT_PAGES, analysis_file
from cotdyn.files.strict import UntrustedFileError, read_bytes, read_json
from cotdyn.provenance.integrity import MATCH, MISMATCH, MISSING, UNLISTED, FileCheck, stored_check
from cotdyn.report.csp import PAGE_SUFFIXES

MAX_PAGE_BYTES = 64 << 20  # a report page: tens of kB
MAX_RESULT_BYTES = 64 << 20  # report/audit.json: a line per file of the study

NOT_VOUCHED = "a report file the audit does not re-render: not vouched for"
# A page (cotdyn.report.csp.PAGE_SUFFIXES: what a browser renders, and so may run script in) is
# re-rendered where the project writes it, and refused anywhere else.
REFUSED_PAGE = "a page the project does not write here, not re-rendered: refused (opened, it would run what it holds)"


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


def page_check(view: StudyView, derived_dir: Path, path: str, stored: dict) -> FileCheck:
    variant, page = page_variant(path)
    if not (derived_dir / analysis_file(variant, "hypotheses.json")).is_file():
        return FileCheck(path, MISSING, "report page of a variant the audit did not re-derive")
    try:
        ours = rendered(view.root, derived_dir, variant, page, stored)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return FileCheck(path, MISMATCH, f"could not be re-rendered ({type(e).__name__}: {str(e)[:200]})")
    try:
        theirs = read_bytes(view.current(path), max_bytes=MAX_PAGE_BYTES)
    except UntrustedFileError as e:
        return FileCheck(path, MISMATCH, f"not read ({e})")
    if ours != theirs:
        detail = f"re-rendered from the re-derived analysis, the page differs ({first_difference(ours, theirs)})"
        return FileCheck(path, MISMATCH, detail)
    return FileCheck(path, MATCH, "re-rendered from the re-derived analysis")


def report_files(view: StudyView) -> list[str]:
    """Every file under the study's report/ (which the manifest leaves out) the admission's walk
    found, by relative path."""
    return [rel for rel in sorted(view.entries) if rel.startswith(f"{REPORT_DIR}/") and view.holds(rel)]


def derived_check(view: StudyView, derived_dir: Path, path: str) -> FileCheck:
    """A report file the audit re-derived (the grading tables and page) against the study's."""
    try:
        theirs = read_bytes(view.current(path), max_bytes=MAX_PAGE_BYTES)
    except UntrustedFileError as e:
        return FileCheck(path, MISMATCH, f"not read ({e})")
    ours = (derived_dir / path).read_bytes()
    if ours != theirs:
        return FileCheck(
            path, MISMATCH, f"re-derived from the stored raw data, it differs ({first_difference(ours, theirs)})"
        )
    return FileCheck(path, MATCH, "re-derived from the stored raw data")


def is_page(path: str) -> bool:
    return path.lower().endswith(PAGE_SUFFIXES)


def report_check(view: StudyView, derived_dir: Path, path: str, stored: dict | None) -> FileCheck:
    if page_variant(path):
        return page_check(view, derived_dir, path, stored)
    if (derived_dir / path).is_file():
        return derived_check(view, derived_dir, path)
    return FileCheck(path, MISMATCH, REFUSED_PAGE) if is_page(path) else FileCheck(path, UNLISTED, NOT_VOUCHED)


def refuse_pages(check: FileCheck) -> FileCheck:
    """A page elsewhere in the study that no comparison vouched for (not in the manifest) is refused."""
    return FileCheck(check.path, MISMATCH, REFUSED_PAGE) if check.status == UNLISTED and is_page(check.path) else check


def check_pages(files: list[FileCheck], view: StudyView, derived_dir) -> list[FileCheck]:
    """The audit's file checks, each page among them that nothing vouched for refused, followed by
    report/ as the admission found it (read through the study's view): its pages re-rendered or
    re-derived and compared, any other page refused, the rest named as not vouched for."""
    derived_dir = Path(derived_dir)
    paths = [p for p in report_files(view) if p not in {f.path for f in files}]
    stored = stored_check(view.root) if any(page_variant(p) for p in paths) else None
    return [refuse_pages(f) for f in files] + [report_check(view, derived_dir, p, stored) for p in paths]
