"""The header of the study report: the plan hash and every cell's deviations, shown first."""

from __future__ import annotations

import json
from pathlib import Path

from cotdyn.files.writers import write_bytes, write_text
from cotdyn.provenance.integrity import audit_verdict, warning_text
from cotdyn.report.scope import NOT_RUN, cells_absent, cells_run, scope_lines


def _deviation_text(item) -> str:
    if isinstance(item, dict) and "parameter" in item:
        return f"{item['parameter']}: {item.get('registered')!r} -> {item.get('used')!r}"
    return item if isinstance(item, str) else json.dumps(item, sort_keys=True)


def _indented(text: str, by: int) -> list[str]:
    return [" " * by + line if line else "" for line in text.splitlines()]


def scope_and_integrity(hypotheses: dict, audit: dict | None, stored: dict | None) -> list[str]:
    """The study's scope (cells run, registered cells not run, what each verdict rests on) and its
    integrity (manifest sha256, audit verdict, a warning when outputs no longer match), as rst."""
    lines = ["Scope", "-----", ""]
    lines += [f"Cells run: {', '.join(f'``{c}``' for c in cells_run(hypotheses)) or 'none'}.", ""]
    absent = cells_absent(hypotheses)
    lines += [
        f"Registered cells not run: {', '.join(f'``{c}``' for c in absent) or 'none'}"
        + (f' (shown as "{NOT_RUN}" in the tables, left out of the figures).' if absent else "."),
        "",
    ]
    lines += [f"- {line}" for line in scope_lines(hypotheses)] + ["", "Integrity", "---------", ""]
    warning = warning_text(audit, stored)
    if warning:
        # a literal block: file names and details go through unread by rst
        lines += [".. warning::", "", "   ::", "", *_indented(warning, 6), ""]
    source = audit or stored or {}
    lines += [f"Study manifest SHA-256: ``{source.get('manifest_sha256')}``", ""]
    if audit is not None:
        counts = ", ".join(f"{n} {s}" for s, n in audit["counts"].items())
        lines += [
            f"Audit after the run: **{audit_verdict(audit, stored)}** ({counts} files; {audit['check']}).",
            "",
        ]
    return lines


def report_header(
    variant: str, hypotheses: dict, plan_check: dict, audit: dict | None = None, stored: dict | None = None
) -> str:
    """reStructuredText naming the plan hash the analysis ran under, the declared deviations of
    every cell for this variant (checks/plan_check.json), the study's scope and its integrity
    (cotdyn.provenance.integrity), shown first in the Snakemake report."""
    plan_hash = hypotheses.get("plan_sha256")
    if plan_hash is None:
        raise KeyError("hypotheses.json: missing key 'plan_sha256'")
    title = f"cotdyn study report: variant ``{variant}``"
    lines = [
        title,
        "=" * len(title),
        "",
        f"Plan SHA-256: ``{plan_hash}``, plan version {hypotheses.get('plan_version', '1 or 2 (not recorded)')}",
        "",
        f"Plan check SHA-256: ``{plan_check.get('plan_sha256')}`` "
        f"(registered {plan_check.get('registered', {}).get('date')})",
        "",
        "Differences from the registered protocol, by cell (for confirmatory cells, the declared deviations):",
        "",
    ]
    cells = plan_check.get("cells")
    if not isinstance(cells, dict):
        raise KeyError("plan_check.json: missing key 'cells'")
    for cell, block in sorted(cells.items()):
        # confirmatory cells carry the declared deviations of the registered protocol; the others
        # list, per variant, every parameter that differs from the plan
        if block.get("confirmatory"):
            items, role = block.get("deviations", []), "confirmatory, declared deviations"
        else:
            items, role = block.get("differences", {}).get(variant, []), "not confirmatory, differences from the plan"
        text = "; ".join(_deviation_text(d) for d in items) or "none"
        lines.append(f"- ``{cell}`` ({role}): {text}")
    lines += ["", *scope_and_integrity(hypotheses, audit, stored)]
    lines += [
        "Everything under *exploratory* and *sweeps* is outside the registration: no registered verdict rests on it.",
        "",
    ]
    return "\n".join(lines)


def header_html(text: str) -> bytes:
    """The header as a standalone HTML page (docutils), without date or generator stamps."""
    from docutils.core import publish_string

    return publish_string(
        text,
        writer_name="html5",
        settings_overrides={"datestamp": False, "generator": False, "embed_stylesheet": True, "_disable_config": True},
    )


def header_bytes(
    variant: str,
    hypotheses_path: str | Path,
    plan_check_path: str | Path,
    audit_path: str | Path | None = None,
    stored: dict | None = None,
) -> bytes:
    """The header as HTML; ``audit_path`` is the audit's JSON (cotdyn.audit.result.audit_result), None
    where it has not run, and ``stored`` a cotdyn.provenance.integrity.stored_check."""
    audit = json.loads(Path(audit_path).read_text()) if audit_path is not None else None
    text = report_header(
        variant,
        json.loads(Path(hypotheses_path).read_text()),
        json.loads(Path(plan_check_path).read_text()),
        audit,
        stored,
    )
    return header_html(text)


def write_header(
    variant: str,
    hypotheses_path: str | Path,
    plan_check_path: str | Path,
    out: str | Path,
    audit_path: str | Path | None = None,
    stored: dict | None = None,
) -> Path:
    """The report header as ``.html`` (rendered) or, for any other suffix, as reStructuredText."""
    if Path(out).suffix == ".html":
        return write_bytes(header_bytes(variant, hypotheses_path, plan_check_path, audit_path, stored), out)
    audit = json.loads(Path(audit_path).read_text()) if audit_path is not None else None
    hypotheses, check = json.loads(Path(hypotheses_path).read_text()), json.loads(Path(plan_check_path).read_text())
    return write_text(report_header(variant, hypotheses, check, audit, stored), out)
