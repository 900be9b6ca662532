"""The header of the study report: the plan hash and every cell's deviations, shown first."""

from __future__ import annotations

import json
from pathlib import Path

from cotdyn.writers import write_bytes, write_text


def _deviation_text(item) -> str:
    if isinstance(item, dict) and "parameter" in item:
        return f"{item['parameter']}: {item.get('registered')!r} -> {item.get('used')!r}"
    return item if isinstance(item, str) else json.dumps(item, sort_keys=True)


def report_header(variant: str, hypotheses: dict, plan_check: dict) -> str:
    """reStructuredText naming the plan hash the analysis ran under and the declared deviations of
    every cell for this variant (checks/plan_check.json), shown first in the Snakemake report."""
    plan_hash = hypotheses.get("plan_sha256")
    if plan_hash is None:
        raise KeyError("hypotheses.json: missing key 'plan_sha256'")
    title = f"cotdyn study report: variant ``{variant}``"
    lines = [
        title,
        "=" * len(title),
        "",
        f"Plan SHA-256: ``{plan_hash}``",
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
    lines += [
        "",
        "Everything under *exploratory* and *sweeps* is outside the registration (docs/design.md section 6).",
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


def write_header(variant: str, hypotheses_path: str | Path, plan_check_path: str | Path, out: str | Path) -> Path:
    """The report header as ``.html`` (rendered) or, for any other suffix, as reStructuredText."""
    text = report_header(
        variant, json.loads(Path(hypotheses_path).read_text()), json.loads(Path(plan_check_path).read_text())
    )
    if Path(out).suffix == ".html":
        return write_bytes(header_html(text), out)
    return write_text(text, out)
