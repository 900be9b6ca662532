"""The report's rendered pages over hypotheses.json (docs/reference.md sections 5 and 7): the study's
scope (which cells ran, which registered cells did not, and what that leaves of each verdict),
and the "Registered results" page (verdicts, the panel table shaped like seed 003 section 4's,
the Holm family), each carrying the study's integrity (cotdyn.provenance.integrity).

Verdicts are read generically: every key a hypothesis or cell verdict carries is shown, so a new
verdict field appears on the page without a change here.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from cotdyn.analysis.hypotheses.outputs import table_rows
from cotdyn.files.writers import write_bytes
from cotdyn.provenance.integrity import audit_verdict, warning_text
from cotdyn.report.csp import with_policy
from cotdyn.report.header import header_bytes
from cotdyn.report.scope import NOT_RUN, cells_absent, cells_run, scope_lines  # noqa: F401 (also read from here)

# cell-verdict keys with a column of their own (holm_reject: the Holm column); any other key goes
# to the "details" column, where it is left out when it says nothing (see details_text)
SHOWN = ("verdict", "estimate", "ci", "reason", "holm_reject")


# --- formatting -------------------------------------------------------------------------------


def number(value, statistic: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:+.2f}" if statistic.endswith("_pp") else f"{value:.3g}"
    return str(value)


def interval(ci, statistic: str = "") -> str:
    """A CI as text; an undefined one is "not estimable", and a zero-width one (a constant outcome)
    is said to be one rather than shown as if it were precise."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return "not estimable"
    if ci[0] == ci[1]:
        return f"zero width at {number(ci[0], statistic)}: constant outcome, not estimable"
    return f"[{number(ci[0], statistic)}, {number(ci[1], statistic)}]"


def criterion_text(criterion) -> str:
    if not isinstance(criterion, dict):
        return str(criterion)
    kind = criterion.get("kind")
    rest = ", ".join(f"{k} {v}" for k, v in criterion.items() if k != "kind")
    return f"{kind} ({rest})" if rest else str(kind)


def says_nothing(key: str, value, block: dict, resamples: int | None) -> bool:
    """An empty value, a CI criterion that is the cell verdict itself, or a bootstrap that kept
    every resample."""
    return (
        value in (None, "", [], {})
        or (key == "ci_criterion" and value == block.get("verdict"))
        or (key == "ci_n_kept" and (value == resamples or value == 0 and block.get("ci") == [None, None]))
    )


def details_text(block: dict, resamples: int | None = None) -> str:
    """The cell verdict's other fields, each as ``key: value``; ``resamples``: the bootstrap size of
    the analysis settings, so only a bootstrap that dropped resamples says how many it kept."""
    shown = []
    for key, value in block.items():
        if key in SHOWN or says_nothing(key, value, block, resamples):
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            text = "; ".join(value)
        elif isinstance(value, (dict, list)):
            text = json.dumps(value, sort_keys=True)
        else:
            text = number(value)
        shown.append(f"{key}: {text}")
    return "; ".join(shown)


def holm_text(hid: str, cell: str, block: dict, holm: list[dict]) -> str:
    if "holm_reject" in block:
        return {True: "rejected", False: "not rejected", None: "not tested"}.get(block["holm_reject"], "")
    for m in holm:
        if m.get("id") == hid and m.get("cell") == cell:
            if m.get("reject") is None:
                return f"p undefined ({m.get('reason')})"
            decision = "rejected" if m["reject"] else "not rejected"
            return (
                f"{decision} (p {number(m.get('p'))}, adjusted {number(m.get('p_adjusted'))}, alpha {m.get('alpha')})"
            )
    return "not in the family"


# --- rows -------------------------------------------------------------------------------------


def _joined(cells: dict, key: str) -> str:
    """The distinct values of one key over the cells, in order."""
    return "; ".join(dict.fromkeys(str(b.get(key)) for b in cells.values() if b.get(key)))


def absent_row(hid: str, v: dict, cells: dict, holm: list[dict]) -> dict:
    """The row of a hypothesis none of whose registered cells ran."""
    in_family = any(m.get("id") == hid and m.get("cell") in cells for m in holm)
    return {
        "hypothesis": hid, "verdict": v.get("verdict"), "criterion": criterion_text(v.get("criterion")),
        "cell": f"none of its {len(cells)} cells ran ({NOT_RUN}): {', '.join(cells)}",
        "cell verdict": _joined(cells, "verdict"), "estimate": "", "95% CI": "not estimable",
        "Holm": "not decided (no cell ran)" if in_family else "not in the family", "reason": _joined(cells, "reason"),
        "details": "",
    }  # fmt: skip


def verdict_rows(result: dict) -> list[dict]:
    """One row per (hypothesis, registered cell); the hypothesis verdict heads its rows."""
    run, holm, rows = set(cells_run(result)), result.get("holm", []), []
    resamples = result.get("settings", {}).get("bootstrap", {}).get("resamples")
    for hid, v in result.get("verdicts", {}).items():
        statistic = v.get("statistic", "")
        cells = v.get("cells", {}) or {"": {}}
        if cells and not run & set(cells) and "" not in cells:
            rows.append(absent_row(hid, v, cells, holm))  # one row, not one per absent cell
            continue
        for cell, block in cells.items():
            rows.append({
                "hypothesis": hid, "verdict": v.get("verdict"), "criterion": criterion_text(v.get("criterion")),
                "cell": cell if cell in run or not cell else f"{cell} ({NOT_RUN})",
                "cell verdict": block.get("verdict"), "estimate": number(block.get("estimate"), statistic),
                "95% CI": interval(block.get("ci"), statistic), "Holm": holm_text(hid, cell, block, holm),
                "reason": block.get("reason") or "", "details": details_text(block, resamples),
            })  # fmt: skip
    return rows


PANEL_COLUMNS = {  # seed 003 section 4's table, with n analysed and n total kept apart
    "cell": "cell", "role": "role", "n": "n analysed", "n_total": "n total", "excluded_share": "excl.",
    "accuracy": "acc", "median_points": "med. pts", "coverage": "cov.", "gap_pp": "gap (pp)", "ci": "95% CI",
    "odds_ratio": "OR", "ci_excludes_0": "CI excl. 0", "reason": "reason",
}  # fmt: skip


def panel_rows(result: dict) -> list[dict]:
    absent = set(cells_absent(result))
    rows = []
    # the cells that ran first, then the registered cells that did not
    for row in sorted(table_rows(result)["panel_table"], key=lambda r: r["cell"] in absent):
        cell = row["cell"]
        if cell in absent:
            rows.append({"cell": cell, "role": row["role"], "reason": NOT_RUN})
            continue
        share = row["excluded_share"]
        rows.append({
            "cell": cell, "role": row["role"], "n": row["n_analyzed"], "n_total": row["n"],
            "excluded_share": "" if share is None else f"{100 * share:.1f}%", "accuracy": number(row["accuracy"]),
            "median_points": number(row["median_points"]), "coverage": number(row["coverage"]),
            "gap_pp": number(row["gap_pp"], "_pp"), "ci": interval([row["ci_lo"], row["ci_hi"]], "_pp"),
            "odds_ratio": number(row["odds_ratio"]), "ci_excludes_0": number(row["ci_excludes_0"]),
            "reason": row["reason"] or "",
        })  # fmt: skip
    return [{PANEL_COLUMNS[k]: r.get(k, "") for k in PANEL_COLUMNS} for r in rows]


def holm_rows(result: dict) -> list[dict]:
    """The Holm family, member by member. A member whose cell's verdict is not_estimable is shown with
    that reason, not as a decision: its p-value decides nothing the page reports."""
    verdicts = result.get("verdicts") or {}
    rows = []
    for m in table_rows(result)["holm_table"]:
        cell = ((verdicts.get(m["id"]) or {}).get("cells") or {}).get(m["cell"]) or {}
        if cell.get("verdict") == "not_estimable":
            decision, reason = f"none: {m['id']} is not_estimable in this cell", cell.get("reason") or m["reason"] or ""
        else:
            decision = "not decided" if m["reject"] is None else ("rejected" if m["reject"] else "not rejected")
            reason = m["reason"] or ""
        rows.append(
            {
                "hypothesis": m["id"],
                "cell": m["cell"],
                "p": m["p_name"],
                "value": number(m["p"]),
                "adjusted": number(m["p_adjusted"]),
                "alpha": number(m["alpha"]),
                "decision": decision,
                "reason": reason,
            }  # fmt: skip
        )
    return rows


# --- HTML -------------------------------------------------------------------------------------

STYLE = """body{font-family:sans-serif;font-size:14px;margin:1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}th,td{border:1px solid #bbb;padding:3px 6px;text-align:left;
vertical-align:top}th{background:#eee}td.supported{background:#d9f2d9}td.not_supported{background:#f8d7d7}
td.not_estimable,td.not-run{background:#eee;color:#555}.warning{border:2px solid #b00;background:#fde8e8;
padding:0.5em 1em;white-space:pre-wrap;font-family:monospace}.ok{border:1px solid #2a2;background:#eaf7ea;
padding:0.5em 1em}code{font-size:12px}"""


def _cell(value) -> str:
    text = html.escape(str(value))
    css = str(value).split(" ")[0] if str(value) in ("supported", "not_supported", "not_estimable") else ""
    if f"({NOT_RUN})" in str(value) or value == NOT_RUN:
        css = "not-run"
    return f'<td class="{css}">{text}</td>' if css else f"<td>{text}</td>"


def table_html(rows: list[dict], empty: str, merged: tuple[str, ...] = ()) -> str:
    """An HTML table; the ``merged`` columns span the consecutive rows that share their values."""
    if not rows:
        return f"<p><em>{html.escape(empty)}</em></p>"
    columns = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    key = [tuple(r[c] for c in merged) for r in rows]
    body = []
    for i, r in enumerate(rows):
        span = next((j for j in range(i + 1, len(rows)) if key[j] != key[i]), len(rows)) - i
        first = i == 0 or key[i - 1] != key[i]
        cells = []
        for c in columns:
            if c in merged and not first:
                continue
            cell = _cell(r[c])
            cells.append(cell.replace("<td", f'<td rowspan="{span}"', 1) if c in merged and span > 1 else cell)
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def integrity_html(audit: dict | None, stored: dict | None) -> str:
    """The study manifest's sha256, the audit's verdict, and a red warning when the audit failed
    or the stored files no longer match the manifest."""
    warning = warning_text(audit, stored)
    source = audit or stored or {}
    parts = [f"<p>Study manifest SHA-256: <code>{html.escape(str(source.get('manifest_sha256')))}</code></p>"]
    if audit is not None and audit.get("registration"):
        parts.append(f'<p id="registration">Registration: {html.escape(str(audit["registration"]))}</p>')
    if warning:
        parts.append(f'<div class="warning" id="integrity-warning">{html.escape(warning)}</div>')
    if audit is not None:
        counts = html.escape(", ".join(f"{n} {s}" for s, n in audit["counts"].items()))
        verdict = audit_verdict(audit, stored)
        css = "ok" if verdict == "PASS" else "warning"
        parts.append(
            f'<p class="{css}" id="audit-status">Audit after the run: <strong>{html.escape(verdict)}</strong> '
            f"({counts} files).</p>"
        )
    if stored is not None and stored["ok"]:
        parts.append("<p>When this page was written every stored file matched the study manifest.</p>")
    return "\n".join(parts)


def audit_files_html(audit: dict | None) -> str:
    if audit is None:
        return ""
    rows = [{"file": f["path"], "audit": f["status"], "detail": f["detail"]} for f in audit["files"]]
    return (
        f"<details><summary>Audit, file by file ({len(rows)} files)</summary>{table_html(rows, 'no files')}</details>"
    )


def registered_results_html(variant: str, result: dict, audit: dict | None, stored: dict | None) -> bytes:
    run, absent = cells_run(result), cells_absent(result)
    scope = "".join(f"<li>{html.escape(line)}</li>" for line in scope_lines(result))
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Registered results: {html.escape(variant)}</title>
<style>{STYLE}</style></head><body>
<h1>Registered results, variant <code>{html.escape(variant)}</code></h1>
<p>Plan SHA-256 <code>{html.escape(str(result.get("plan_sha256")))}</code>, plan version {html.escape(str(result.get("plan_version", "1 or 2 (not recorded)")))}. Cells run: {html.escape(", ".join(run) or "none")}.
Registered cells not run: {html.escape(", ".join(absent) or "none")} (shown as "{NOT_RUN}", left out of the figures).</p>
{integrity_html(audit, stored)}
<h2>Verdicts (H1-H5)</h2>
<ul>{scope}</ul>
{table_html(verdict_rows(result), "the plan registers no hypotheses", ("hypothesis", "verdict", "criterion"))}
<h2>Panel (seed 003 section 4's table)</h2>
<p>n analysed: records kept after the exclusion rule; n total: records of the cell; excl.: the share
excluded. The gap is monotone minus non-monotone accuracy in percentage points with its 95% bootstrap CI.</p>
{table_html(panel_rows(result), "no cells")}
<h2>Holm family</h2>
<p>Holm-Bonferroni over the registered family; an undefined p enters as 1 and is not decided.</p>
{table_html(holm_rows(result), "the plan registers no Holm family")}
{audit_files_html(audit)}
</body></html>
"""
    return with_policy(body).encode()


def read_json(path) -> dict | None:
    return json.loads(Path(path).read_text()) if path is not None and Path(path).exists() else None


def write_registered_results(variant: str, hypotheses, audit, stored: dict | None, out) -> Path:
    """registered_results.html from hypotheses.json and the audit's JSON (None: not run)."""
    result = json.loads(Path(hypotheses).read_text())
    return write_bytes(registered_results_html(variant, result, read_json(audit), stored), out)


def write_pages(study_dir, variant: str, stored: dict | None) -> list[Path]:
    """Both report pages of one variant from the study's files (cotdyn.files.layout paths); a page whose
    bytes would not change is left untouched."""
    from cotdyn.files.layout import AUDIT_RESULT, PLAN_CHECK, analysis_file, report_page

    study_dir = Path(study_dir)
    hypotheses, audit = study_dir / analysis_file(variant, "hypotheses.json"), study_dir / AUDIT_RESULT
    audit = audit if audit.exists() else None
    pages = {
        "header.html": header_bytes(variant, hypotheses, study_dir / PLAN_CHECK, audit, stored),
        "registered_results.html": registered_results_html(
            variant, json.loads(hypotheses.read_text()), read_json(audit), stored
        ),
    }
    written = []
    for name, data in pages.items():
        out = study_dir / report_page(variant, name)
        if not out.exists() or out.read_bytes() != data:
            written.append(write_bytes(data, out))
    return written


def refresh_for_report(study_dir, variants) -> str | None:
    """When the report is built: check the stored files against the manifest, rewrite the pages of
    every variant that has its analysis so they show the result, and return the warning (None when
    the study is intact) for the console."""
    from cotdyn.files.layout import AUDIT_RESULT, analysis_file
    from cotdyn.provenance.integrity import stored_check

    study_dir = Path(study_dir)
    stored = stored_check(study_dir)
    for variant in variants:
        if (study_dir / analysis_file(variant, "hypotheses.json")).exists():
            write_pages(study_dir, variant, stored)
    return warning_text(read_json(study_dir / AUDIT_RESULT), stored)
