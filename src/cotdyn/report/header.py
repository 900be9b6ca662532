"""The header of the study report: the plan hash and every cell's deviations, shown first."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

from cotdyn.files.writers import write_bytes
from cotdyn.provenance.integrity import NOT_VERIFIED, audit_verdict, warning_text
from cotdyn.report.csp import with_policy
from cotdyn.report.scope import NOT_RUN, cells_absent, cells_run, scope_lines

# --- values from data as rst: text, never markup ------------------------------------------------
# Every value on the page comes from a study folder someone else may have written: it goes into the
# rst as text (markup characters escaped, control characters and line breaks as spaces), docutils
# renders with raw HTML and file insertion off, and a link other than relative or http(s) becomes text.

SAFE_SETTINGS = {"raw_enabled": False, "file_insertion_enabled": False, "_disable_config": True}
SAFE_SCHEMES = ("", "http", "https")
# characters that open inline markup wherever they stand; "_" only where it can end a reference
MARKUP = re.compile(r"([\\`*|]|(?<!\w)_|_(?!\w))")


def _one_line(value) -> str:
    return "".join(" " if unicodedata.category(c).startswith(("C", "Z")) else c for c in str(value)).strip()


def rst_text(value) -> str:
    """A value from data as rst that reads as the value itself."""
    return MARKUP.sub(r"\\\1", _one_line(value))


def rst_literal(value) -> str:
    """A value from data in code font; one that could close the literal early goes as plain text."""
    text = _one_line(value)
    return f"``{text}``" if text and "`" not in text and not text.endswith("\\") else rst_text(text)


def _deviation_text(item) -> str:
    if isinstance(item, dict) and "parameter" in item:
        return rst_text(f"{item['parameter']}: {item.get('registered')!r} -> {item.get('used')!r}")
    return rst_text(item if isinstance(item, str) else json.dumps(item, sort_keys=True))


def _indented(text: str, by: int) -> list[str]:
    return [" " * by + line if line else "" for line in text.splitlines()]


def model_check_sentence(audit: dict | None) -> str:
    """Whether the raw data were regenerated from the model (cotdyn.audit.regenerate), in a sentence."""
    check = (audit or {}).get("model_check", NOT_VERIFIED)
    if check == NOT_VERIFIED:
        return (
            "The raw data (chains and continuations) were not verified against the model: the audit re-derives "
            "the study from them. To verify them, regenerate from the model: "
            "``cotdyn audit results/<study> --regenerate N``."
        )
    return f"The raw data were checked against the model: {rst_text(str(check))}."


def scope_and_integrity(hypotheses: dict, audit: dict | None, stored: dict | None) -> list[str]:
    """The study's scope (cells run, registered cells not run, what each verdict rests on) and its
    integrity (manifest sha256, audit verdict, a warning when outputs no longer match), as rst."""
    lines = ["Scope", "-----", ""]
    lines += [f"Cells run: {', '.join(rst_literal(c) for c in cells_run(hypotheses)) or 'none'}.", ""]
    absent = cells_absent(hypotheses)
    lines += [
        f"Registered cells not run: {', '.join(rst_literal(c) for c in absent) or 'none'}"
        + (f' (shown as "{NOT_RUN}" in the tables, left out of the figures).' if absent else "."),
        "",
    ]
    lines += [f"- {rst_text(line)}" for line in scope_lines(hypotheses)] + ["", "Integrity", "---------", ""]
    warning = warning_text(audit, stored)
    if warning:
        # a literal block: file names and details go through unread by rst
        lines += [".. warning::", "", "   ::", "", *_indented(warning, 6), ""]
    source = audit or stored or {}
    lines += [f"Study manifest SHA-256: {rst_literal(source.get('manifest_sha256'))}", ""]
    if stored is not None and stored.get("cotdyn"):
        lines += [f"Made by cotdyn {rst_literal(stored['cotdyn'])} (as its manifest records).", ""]
    if audit is not None and audit.get("registration"):
        lines += [f"Registration: {rst_text(str(audit['registration']))}", ""]
    if audit is not None:
        counts = rst_text(", ".join(f"{n} {s}" for s, n in audit["counts"].items()))
        lines += [
            f"Audit after the run: **{audit_verdict(audit, stored)}** ({counts} files; {rst_text(audit['check'])}).",
            "",
        ]
    lines += [f"{model_check_sentence(audit)}", ""]
    return lines


def registered_when(registered) -> str:
    """When the plan was registered, in words: the timestamp token's time where REGISTERED records
    one (cotdyn.plan.attestation), else the date the author typed, labelled as such."""
    if not isinstance(registered, dict):
        return f"registered {registered} (author's date)"
    if registered.get("registration"):
        return str(registered["registration"])
    return f"registered {registered.get('date')} (author's date)"


def report_header(
    variant: str, hypotheses: dict, plan_check: dict, audit: dict | None = None, stored: dict | None = None
) -> str:
    """reStructuredText naming the plan hash the analysis ran under, the declared deviations of
    every cell for this variant (checks/plan_check.json), the study's scope and its integrity
    (cotdyn.provenance.integrity), shown first in the Snakemake report."""
    plan_hash = hypotheses.get("plan_sha256")
    if plan_hash is None:
        raise KeyError("hypotheses.json: missing key 'plan_sha256'")
    registered = plan_check.get("registered", {})
    title = f"cotdyn study report: variant {rst_literal(variant)}"
    lines = [
        title,
        "=" * len(title),
        "",
        f"Plan SHA-256: {rst_literal(plan_hash)}, plan version "
        + rst_text(hypotheses.get("plan_version", "1 or 2 (not recorded)")),
        "",
        f"Plan check SHA-256: {rst_literal(plan_check.get('plan_sha256'))} ({rst_text(registered_when(registered))})",
        "",
        "Differences from the registered protocol, by cell (for confirmatory cells, the declared deviations):",
        "",
    ]
    if isinstance(registered, dict) and registered.get("underpowered"):  # cotdyn register --underpowered
        lines[3:3] = [f"**Underpowered at registration** ({rst_text(registered['underpowered'])}).", ""]
    limit = plan_check.get("limit")
    if isinstance(limit, dict):  # a limited study (config limit): said before anything is read as a result
        lines[3:3] = [f"**Descriptive study**: {rst_text(limit.get('scope'))}.", ""]
    cells = plan_check.get("cells")
    if not isinstance(cells, dict):
        raise KeyError("plan_check.json: missing key 'cells'")
    for cell, block in sorted(cells.items()):
        block = block if isinstance(block, dict) else {}
        # confirmatory cells carry the declared deviations of the registered protocol; the others
        # list, per variant, every parameter that differs from the plan
        if block.get("confirmatory"):
            items, role = block.get("deviations", []), "confirmatory, declared deviations"
        else:
            items, role = block.get("differences", {}).get(variant, []), "not confirmatory, differences from the plan"
        text = "; ".join(_deviation_text(d) for d in items) or "none"
        lines.append(f"- {rst_literal(cell)} ({role}): {text}")
    lines += ["", *scope_and_integrity(hypotheses, audit, stored)]
    lines += [
        "Everything under *exploratory* and *sweeps* is outside the registration: no registered verdict rests on it.",
        "",
    ]
    return "\n".join(lines)


def safe_uri(uri: str) -> bool:
    """A relative link or an http(s) one (browsers drop control characters and spaces in a scheme)."""
    return urlsplit(re.sub(r"[\x00-\x20]", "", uri)).scheme.lower() in SAFE_SCHEMES


def links_as_text(doctree) -> None:
    """Every link or image whose target is not relative or http(s) becomes its text."""
    from docutils import nodes

    for node in list(doctree.findall(lambda n: isinstance(n, (nodes.reference, nodes.image)))):
        uri = node.get("refuri") if isinstance(node, nodes.reference) else node.get("uri")
        if uri is not None and not safe_uri(uri):
            node.replace_self(nodes.Text(node.astext() or uri))


def header_html(text: str) -> bytes:
    """The header as a standalone HTML page (docutils, raw HTML and file insertion off, links only
    relative or http(s)), without date or generator stamps."""
    from docutils.core import publish_doctree, publish_from_doctree

    doctree = publish_doctree(text, settings_overrides=SAFE_SETTINGS)
    links_as_text(doctree)
    page = publish_from_doctree(
        doctree,
        writer="html5",
        settings_overrides={**SAFE_SETTINGS, "datestamp": False, "generator": False, "embed_stylesheet": True},
    )
    return with_policy(page.decode()).encode()  # cotdyn.report.csp: nothing in the page runs


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
    return write_bytes(header_bytes(variant, hypotheses_path, plan_check_path, audit_path, stored), out)
