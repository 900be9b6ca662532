"""A study's scope as the report states it: which cells ran, which registered cells did not, and
what that leaves of each verdict (read from hypotheses.json)."""

from __future__ import annotations

NOT_RUN = "not run"


def cells_run(result: dict) -> list[str]:
    return [c for c, b in result.get("cells", {}).items() if b.get("summary", {}).get("status") != "missing"]


def cells_absent(result: dict) -> list[str]:
    """Registered cells the analysis names but no records reached (hypotheses.missing_cell)."""
    return [c for c, b in result.get("cells", {}).items() if b.get("summary", {}).get("status") == "missing"]


def scope_lines(result: dict) -> list[str]:
    """Per hypothesis, which of its registered cells ran, and what the verdict therefore rests on."""
    run = set(cells_run(result))
    lines = []
    for hid, v in result.get("verdicts", {}).items():
        cells = list(v.get("cells", {}))
        have = [c for c in cells if c in run]
        verdict = v.get("verdict")
        if not cells:
            what = "names no cells"
        elif not have:
            what = f"none of its {len(cells)} registered cells ran: its verdict ({verdict}) reflects their absence, not the data"
        elif len(have) < len(cells):
            what = (
                f"{len(have)} of its {len(cells)} registered cells ran ({', '.join(have)}); "
                f"its verdict ({verdict}) is over a partial panel"
            )
        else:
            what = f"all {len(cells)} registered cells ran; verdict {verdict}"
        lines.append(f"{hid}: {what}")
    named = {c for v in result.get("verdicts", {}).values() for c in v.get("cells", {})}
    described = [c for c in cells_run(result) if c not in named]
    if described:
        lines.append(
            f"{', '.join(described)}: not a registered cell of any hypothesis; described in the panel table, "
            "no verdict rests on it"
        )
    return lines
