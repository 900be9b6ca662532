"""The study's integrity as its report shows it (docs/reference.md section 7): the study manifest's
sha256, the audit's result per file, and a check of the stored files against the manifest made
when the report is built, so a report over outputs that no longer match their manifest says so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.files.terminal import printable
from cotdyn.provenance.manifests import ManifestError, file_sha256, output_hashes

MAX_MANIFEST_BYTES = 64 << 20  # as cotdyn.audit.untrusted bounds it: a manifest lists hashes

MATCH, MISMATCH, MISSING, UNLISTED = "match", "mismatch", "missing", "unlisted"
# a file in a folder only the DAG writes into that no rule writes for the study's config (cotdyn.audit.expected)
EXTRA = "extra"
STATUSES = (MATCH, MISMATCH, MISSING, UNLISTED, EXTRA)
FAILING = (MISMATCH, MISSING, EXTRA)
# The re-derivation proves the study consistent with its raw data, not the raw data drawn from the
# model (docs/tamper-evidence.md); only ``cotdyn audit DIR --regenerate N|all`` checks that.
NOT_VERIFIED = "raw data not verified against the model"


def how_to_verify(study: str) -> str:
    return f"to verify them, regenerate from the model: cotdyn audit {study} --regenerate N|all [--seed S]"


@dataclass(frozen=True)
class FileCheck:
    path: str
    status: str  # match | mismatch | missing | unlisted | extra
    detail: str = ""


@dataclass
class AuditReport:
    study: str
    files: list[FileCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # plan hash, config hash, undeclared deviations, ...
    model_check: str = NOT_VERIFIED  # or the regeneration's "regenerated: K of N requests equal"
    # the registration in words (plan sha256, when, attested or not) and whether generation is
    # time-locked to it (cotdyn.audit.registration); None where the audit did not get that far
    registration: str | None = None
    time_lock: str | None = None
    scope: str | None = None  # a limited study's (config limit): descriptive, never confirmatory

    @property
    def failures(self) -> list[FileCheck]:
        return [f for f in self.files if f.status in FAILING]

    @property
    def ok(self) -> bool:
        return not self.failures and not self.problems

    def as_dict(self) -> dict:
        return {
            "study": self.study,
            "ok": self.ok,
            "model_check": self.model_check,
            "registration": self.registration_line(),
            "problems": self.problems,
            "files": [asdict(f) for f in self.files],
        } | ({"scope": self.scope} if self.scope else {})

    def registration_line(self) -> str | None:
        """``plan <path> sha256 <hex>; registered <when>, <attestation>; <time lock>``."""
        if self.registration is None:
            return None
        return "; ".join(part for part in (self.registration, self.time_lock) if part)

    def text(self) -> str:
        """The report for a terminal: every name and text from the study with its control
        characters escaped (cotdyn.files.terminal.printable)."""
        verdict = "PASS" if self.ok else "FAIL"
        # what the audit neither re-derives nor compares is listed once, last, and counted apart
        outside = [f for f in self.files if f.status == UNLISTED]
        lines = [printable(self.registration_line())] if self.registration else []
        lines += [
            f"audit of {printable(self.study)}: {verdict} (re-derived from the stored raw data); {self.model_check}"
        ]
        if self.scope:
            lines.append(f"  {printable(self.scope)}")
        if self.model_check == NOT_VERIFIED:
            lines.append(f"  {printable(how_to_verify(self.study))}")
        if outside:
            lines.append(f"  outside this {verdict}: {len(outside)} file(s) not vouched for, listed last")
        lines += [f"  problem: {printable(p)}" for p in self.problems]
        lines += [
            f"  {f.status:9s} {printable(f.path)}" + (f"  ({printable(f.detail)})" if f.detail else "")
            for f in self.files
            if f.status != UNLISTED
        ]
        if outside:
            lines.append(f"  not vouched for, {len(outside)} file(s) the audit neither re-derives nor compares:")
            lines += [f"    {printable(f.path)}" + (f"  ({printable(f.detail)})" if f.detail else "") for f in outside]
        return "\n".join(lines)


def summary(study_dir: Path, report: AuditReport, how: str) -> dict:
    manifest = study_dir / STUDY_MANIFEST
    counts = Counter(f.status for f in report.files)
    return {
        "check": how,
        "manifest_sha256": file_sha256(manifest) if manifest.exists() else None,
        "ok": report.ok,
        "model_check": report.model_check,
        "registration": report.registration_line(),
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "problems": list(report.problems),
        # unlisted files (written after the manifest, such as the report's own pages) are not audited
        "files": [
            {"path": f.path, "status": f.status, "detail": f.detail} for f in report.files if f.status != UNLISTED
        ],
    } | ({"scope": report.scope} if report.scope else {})


def stored_check(study_dir) -> dict:
    """Every stored file's sha256 against the study manifest, without re-deriving anything: fast
    enough to run each time the report is built."""
    study_dir = Path(study_dir)
    report = AuditReport(str(study_dir))
    manifest = study_dir / STUDY_MANIFEST
    made_by = None  # the cotdyn version the manifest records (manifests before issue 63 record none)
    if not manifest.exists():
        report.problems.append(f"{STUDY_MANIFEST} not found: the study has no manifest to check against")
    else:
        from cotdyn.files.strict import read_json

        try:  # strictly (cotdyn.files.strict): a file listed twice is refused, not taken by position
            recorded = read_json(manifest, max_bytes=MAX_MANIFEST_BYTES)
            listed, made_by = recorded.get("files", {}), recorded.get("cotdyn")
            stored = output_hashes(study_dir)
            report.files = [stored_file(path, want, stored.get(path)) for path, want in sorted(listed.items())]
        except (ManifestError, ValueError, AttributeError) as e:  # UntrustedFileError is a ValueError
            report.problems.append(str(e) if not isinstance(e, AttributeError) else f"{manifest}: not a JSON object")
    return summary(study_dir, report, "stored files hashed against the manifest") | (
        {"cotdyn": made_by} if isinstance(made_by, str) else {}
    )


def stored_file(path: str, listed: str, stored: str | None) -> FileCheck:
    if stored is None:
        return FileCheck(path, MISSING, "listed in the manifest, absent from the study")
    if stored != listed:
        return FileCheck(path, MISMATCH, f"stored sha256 {stored} != manifest {listed}")
    return FileCheck(path, MATCH, "stored")


def failures(result: dict) -> list[str]:
    """One line per failing file or problem of an audit_result or stored_check (the hashes are in
    the per-file table)."""
    lines = [f"{f['status']}: {f['path']}" for f in result["files"] if f["status"] != MATCH]
    return lines + [f"problem: {p}" for p in result["problems"]]


def audit_verdict(audit: dict, stored: dict | None) -> str:
    """The audit's verdict as a page shows it: PASS only when the audit passed and the stored files
    still match the manifest, so no page shows PASS beside a failing check."""
    if not audit["ok"]:
        return "FAIL"
    if stored is not None and not stored["ok"]:
        return "FAIL (it passed when it ran; stored files have changed since, see the warning)"
    return "PASS"


def warning_text(audit: dict | None, stored: dict | None) -> str | None:
    """The warning a report over a study that fails its audit or no longer matches its manifest
    carries on its pages and on the console; None when both are clean."""
    lines = []
    if audit is None:
        lines.append("the audit has not run for this study")
    elif not audit["ok"]:
        counts = audit["counts"]
        extra = f", {counts[EXTRA]} extra" if counts.get(EXTRA) else ""
        lines.append(f"the audit FAILED ({counts[MISMATCH]} mismatching, {counts[MISSING]} missing{extra})")
        lines += [f"  {line}" for line in failures(audit)]
    if stored is not None and not stored["ok"]:
        lines.append(
            f"when this report was built, {stored['counts'][MISMATCH] + stored['counts'][MISSING]} stored file(s) "
            "no longer matched the study manifest"
        )
        lines += [f"  {line}" for line in failures(stored)]
    if not lines:
        return None
    return "cotdyn: the study's outputs cannot be trusted as they stand:\n" + "\n".join(lines)
