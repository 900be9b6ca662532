"""H4, the Holm family and the computed verdicts (seed 003 sections 3.4, 4.4, Appendix C)."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from cotdyn import stats
from cotdyn.config import split_cell
from cotdyn.stats import Interval

from .cells import MISSING_CELL, _num, _reason
from .inputs import plan_key

# Where each registered statistic lives in a cell's (or H4's) results.
STATISTICS = {
    "accuracy_gap_pp": ("H1", "gap_pp", "ci"),
    "spearman_coherence_correct": ("H2", "rho", "ci"),
    "spearman_violations_correct": ("H3", "rho", "ci"),
    "fp_reduction_pp_matched_coverage": ("H5", "reduction_pp", "ci"),
    "distilled_gap_difference_pp": ("H4", "difference_pp", "difference_ci"),
}
VERDICTS = ("supported", "not_supported", "not_estimable")
VERDICTS = ("supported", "not_supported", "not_estimable")


def h4_distilled_contrast(
    benchmark: str, cells: dict, gap_resamples: dict, panel: dict, min_group_size: int, level: float
) -> dict:
    """H4 (estimation, two-sided): the distilled gap and its difference from the mean gap of the
    standard models, the difference's CI combining independent per-cell bootstraps resample by
    resample (seed 003 section 4.4). Flagged not estimable when a group is below min_group_size."""
    distilled = f"{plan_key(panel, 'distilled', where='panel')}-{benchmark}"
    standard = [f"{m}-{benchmark}" for m in plan_key(panel, "standard", where="panel")]
    notes = []
    missing = [c for c in [distilled, *standard] if cells.get(c, {}).get("summary", {}).get("status") != "ok"]
    if missing:
        notes.append(f"{MISSING_CELL}: {', '.join(missing)}")
    groups = {}
    for cell in [distilled, *standard]:
        if cell in missing:
            continue
        h1 = cells[cell]["H1"]
        groups[cell] = {"monotone": h1["n_monotone"], "non_monotone": h1["n_non_monotone"]}
        for group, size in groups[cell].items():
            if size < min_group_size:
                notes.append(f"{cell} has {size} {group.replace('_', '-')} chains (< min_group_size {min_group_size})")
    d_h1 = cells[distilled]["H1"] if distilled not in missing else None
    gap = d_h1["gap_pp"] if d_h1 else None
    difference = standard_mean = None
    interval = Interval(None, None, 0, 0)
    gaps = [cells[c]["H1"]["gap_pp"] for c in standard if c not in missing]
    if gap is not None and len(gaps) == len(standard) and None not in gaps:
        standard_mean = float(np.mean(gaps))
        difference = gap - standard_mean
        rows = gap_resamples[distilled] - np.mean([gap_resamples[c] for c in standard], axis=0)
        interval = stats.percentile_interval(rows, level)
    elif not notes:
        notes.append("a gap is undefined in one of the cells")
    return {
        "distilled_cell": distilled,
        "standard_cells": standard,
        "gap_pp": gap,
        "ci": d_h1["ci"] if d_h1 else [None, None],
        "ci_n_kept": d_h1["ci_n_kept"] if d_h1 else 0,
        "standard_mean_gap_pp": _num(standard_mean),
        "difference_pp": _num(difference),
        "difference_ci": interval.as_list(),
        "difference_ci_n_kept": interval.n_kept,
        "group_sizes": groups,
        "min_group_size": min_group_size,
        "estimable": not notes,
        "reason": _reason(notes),
    }


def holm_family(plan: dict, cells: dict) -> list[dict]:
    """Holm-Bonferroni over the plan's family (seed 003 section 3.4, Appendix C).

    A member whose p-value is undefined enters the correction as p = 1, so the family keeps its
    registered size and the other members are never corrected less than registered.
    """
    holm_plan = plan_key(plan, "holm")
    alpha = float(plan_key(holm_plan, "alpha", where="holm"))
    members = []
    for i, member in enumerate(plan_key(holm_plan, "family", where="holm")):
        hid, cell, p_name = (plan_key(member, k, where=f"holm.family[{i}]") for k in ("id", "cell", "p"))
        block = cells.get(cell, {}).get(hid)
        if block is None:
            raise KeyError(f"holm.family[{i}]: no {hid} results for cell '{cell}'")
        if p_name not in block:
            raise KeyError(f"holm.family[{i}]: {hid} has no p-value named '{p_name}'")
        members.append(
            {
                "id": hid,
                "cell": cell,
                "p_name": p_name,
                "p": block[p_name],
                "reason": None if block[p_name] is not None else block.get("reason") or "p undefined",
            }
        )
    if not members:
        return []
    reject, adjusted = stats.holm([1.0 if m["p"] is None else m["p"] for m in members], alpha)
    for m, r, a in zip(members, reject, adjusted):
        m["alpha"] = alpha
        m["p_adjusted"] = _num(a) if m["p"] is not None else None
        m["reject"] = bool(r) if m["p"] is not None else None
    return members


def cell_verdict(criterion: dict, ci: list | None) -> str:
    """One cell's verdict under an interval criterion of the plan."""
    kind = criterion["kind"]
    if ci is None or ci[0] is None or ci[1] is None:
        return "not_estimable"
    lo, hi = ci
    if kind == "ci_lower_above":
        met = lo > float(criterion["value"])
    elif kind == "ci_upper_below":
        met = hi < float(criterion["value"])
    elif kind == "ci_inside":
        met = float(criterion["low"]) < lo and hi < float(criterion["high"])
    else:
        raise ValueError(f"unknown criterion kind '{kind}'")
    return "supported" if met else "not_supported"


def combine_verdicts(verdicts: Iterable[str]) -> str:
    """A hypothesis over several cells: one failing cell decides it; otherwise any undefined cell
    leaves it not estimable."""
    verdicts = list(verdicts)
    if not verdicts:
        return "not_estimable"
    if "not_supported" in verdicts:
        return "not_supported"
    return "not_estimable" if "not_estimable" in verdicts else "supported"


def hypothesis_verdict(hypothesis: dict, cells: dict, h4: dict) -> dict:
    """The verdict of one registered hypothesis, with the numbers that decided it."""
    hid = hypothesis.get("id", "?")
    criterion = plan_key(hypothesis, "criterion", where=f"hypothesis {hid}")
    kind = plan_key(criterion, "kind", where=f"hypothesis {hid}.criterion")
    statistic = plan_key(hypothesis, "statistic", where=f"hypothesis {hid}")
    if statistic not in STATISTICS:
        raise ValueError(f"hypothesis {hid}: unknown statistic '{statistic}' (known: {sorted(STATISTICS)})")
    block_id, estimate_key, ci_key = STATISTICS[statistic]
    entry = {"role": hypothesis.get("role"), "statistic": statistic, "criterion": criterion}
    if kind == "estimation":
        min_group = int(plan_key(criterion, "min_group_size", where=f"hypothesis {hid}.criterion"))
        per = {}
        for cell in hypothesis.get("cells", []):
            benchmark = split_cell(cell)[1]
            est = h4.get(benchmark)
            per[cell] = {
                "verdict": "supported" if est and est["estimable"] else "not_estimable",
                "estimate": est[estimate_key] if est else None,
                "ci": est[ci_key] if est else [None, None],
                "group_sizes": est["group_sizes"] if est else {},
                "reason": est["reason"] if est else f"no H4 result for benchmark '{benchmark}'",
            }
        entry.update(
            cells=per, min_group_size=min_group,
            note="estimation hypothesis: 'supported' means estimable with every group >= min_group_size; "
                 "the two-sided estimate carries no direction",
        )  # fmt: skip
    else:
        over = criterion.get("over")
        if over not in ("all_cells", "each_cell"):
            raise ValueError(f"hypothesis {hid}: criterion.over must be all_cells or each_cell, got {over!r}")
        per = {}
        for cell in hypothesis.get("cells", []):
            block = cells.get(cell, {}).get(block_id, {})
            ci = block.get(ci_key)
            per[cell] = {
                "verdict": cell_verdict(criterion, ci),
                "estimate": block.get(estimate_key),
                "ci": ci if ci is not None else [None, None],
                "ci_n_kept": block.get("ci_n_kept"),
                "reason": block.get("reason"),
            }
        entry["cells"] = per
    verdicts = [v["verdict"] for v in per.values()]
    entry["cells_supported"] = f"{verdicts.count('supported')} of {len(verdicts)}"
    entry["verdict"] = combine_verdicts(verdicts)
    return entry
