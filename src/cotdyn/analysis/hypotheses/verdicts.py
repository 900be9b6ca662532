"""H4, the Holm family and the computed verdicts (seed 003 sections 3.4, 4.4, Appendix C)."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from cotdyn import stats
from cotdyn.analysis.hypotheses.cells import MISSING_CELL, _reason, kept_flags, zero_width_rule
from cotdyn.analysis.hypotheses.inputs import Settings, plan_key
from cotdyn.plan.config import split_cell
from cotdyn.stats import Interval, finite_or_none

# Where each registered statistic lives in a cell's (or H4's) results.
STATISTICS = {
    "accuracy_gap_pp": ("H1", "gap_pp", "ci"),
    "spearman_coherence_correct": ("H2", "rho", "ci"),
    "spearman_violations_correct": ("H3", "rho", "ci"),
    "fp_reduction_pp_matched_coverage": ("H5", "reduction_pp", "ci"),
    "distilled_gap_difference_pp": ("H4", "difference_pp", "difference_ci"),
}
VERDICTS = ("supported", "not_supported", "not_estimable")
# The estimation hypothesis (H4) never says supported (plan verdict_rule.estimation_verdicts).
ESTIMATION_VERDICTS = ("estimated", "imprecise", "not_estimable")


def h4_min_group_size(hypotheses: list[dict], s: Settings) -> int:
    """The smallest group H4 rests on: analysis.groups (plan version 2) or H4's own criterion (version 1)."""
    if s.min_group_size is not None:
        return s.min_group_size
    h4_plan = [h for h in hypotheses if h.get("criterion", {}).get("kind") == "estimation"]
    return int(h4_plan[0]["criterion"]["min_group_size"]) if h4_plan else 0


def estimation_verdict(estimable: bool, smallest_group: int | None, precise_group_size: int | None) -> str:
    """estimated, imprecise (smallest group below precise_group_size) or not_estimable."""
    if not estimable:
        return "not_estimable"
    if precise_group_size is not None and smallest_group is not None and smallest_group < precise_group_size:
        return "imprecise"
    return "estimated"


def h4_distilled_contrast(
    benchmark: str, cells: dict, gap_resamples: dict, panel: dict, min_group_size: int, s: Settings
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
        interval = stats.percentile_interval(rows, s.level, s.quantile_rule)
        if zero_width_rule(interval, s, "H4").get("ci_trusted") is False:
            notes.append(f"zero-width difference interval [{interval.lo:g}, {interval.hi:g}]: fixed by construction")
    elif not notes:
        undefined = [c for c in [distilled, *standard] if cells[c]["H1"]["gap_pp"] is None]
        if s.degenerate == "not_estimable":  # v3 names the cell; v1 and v2 keep the bytes they wrote
            notes += [f"H1's gap is undefined in {c}: {cells[c]['H1']['reason']}" for c in undefined]
        else:
            notes.append("a gap is undefined in one of the cells")
    sizes = [size for g in groups.values() for size in g.values()]
    smallest = min(sizes) if sizes else None
    flags = []
    if not notes and s.precise_group_size is not None and smallest is not None and smallest < s.precise_group_size:
        flags.append(f"imprecise: smallest group {smallest} < precise_group_size {s.precise_group_size}")
    flags += kept_flags(interval, s)
    return {
        "distilled_cell": distilled,
        "standard_cells": standard,
        "gap_pp": gap,
        "ci": d_h1["ci"] if d_h1 else [None, None],
        "ci_n_kept": d_h1["ci_n_kept"] if d_h1 else 0,
        "standard_mean_gap_pp": finite_or_none(standard_mean),
        "difference_pp": finite_or_none(difference),
        "difference_ci": interval.as_list(),
        "difference_ci_n_kept": interval.n_kept,
        "group_sizes": groups,
        "min_group_size": min_group_size,
        "estimable": not notes,
        "verdict": estimation_verdict(not notes, smallest, s.precise_group_size),
        "flags": flags,
        "reason": _reason(notes),
    }


def holm_family(plan: dict, cells: dict, undefined_p: float = 1.0) -> list[dict]:
    """Holm-Bonferroni over the plan's family (seed 003 section 3.4, Appendix C).

    A member whose p-value is undefined enters the correction as ``undefined_p`` (the plan's
    holm.undefined_p, 1), so the family keeps its registered size and the other members are never
    corrected less than registered; such a member is reported as not rejected.
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
    reject, adjusted = stats.holm([undefined_p if m["p"] is None else m["p"] for m in members], alpha)
    for m, r, a in zip(members, reject, adjusted):
        m["alpha"] = alpha
        m["p_entered"] = finite_or_none(undefined_p if m["p"] is None else m["p"])
        m["p_adjusted"] = finite_or_none(a) if m["p"] is not None else None
        m["reject"] = bool(r) if m["p"] is not None else False
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


def combine_estimation(verdicts: Iterable[str]) -> str:
    """Several estimation cells: the least estimable decides."""
    verdicts = list(verdicts)
    for v in ("not_estimable", "imprecise"):
        if not verdicts or v in verdicts:
            return "not_estimable" if not verdicts else v
    return "estimated"


def holm_decision(hid: str, cell: str | None, holm: list[dict]) -> bool | None:
    """Whether Holm rejects every member of hypothesis ``hid`` (in ``cell``, or in any cell when None);
    None where it has no member there."""
    members = [m for m in holm if m["id"] == hid and (cell is None or m["cell"] == cell)]
    return all(m["reject"] for m in members) if members else None


def _with_holm(ci_criterion: str, holm_reject: bool | None, s: Settings) -> str:
    """A cell's verdict: its CI criterion and, where the plan requires it, Holm rejecting its members."""
    if "holm_reject" in s.supported_requires and ci_criterion == "supported" and holm_reject is False:
        return "not_supported"
    return ci_criterion


def _estimation_entry(hid: str, hypothesis: dict, h4: dict, s: Settings, estimate_key: str, ci_key: str) -> dict:
    per = {}
    for cell in hypothesis.get("cells", []):
        benchmark = split_cell(cell)[1]
        est = h4.get(benchmark)
        if s.estimation_verdicts:
            verdict = est["verdict"] if est else "not_estimable"
        else:  # plan version 1: estimable read as supported
            verdict = "supported" if est and est["estimable"] else "not_estimable"
        per[cell] = {
            "verdict": verdict,
            "estimate": est[estimate_key] if est else None,
            "ci": est[ci_key] if est else [None, None],
            "group_sizes": est["group_sizes"] if est else {},
            "flags": est["flags"] if est else [],
            "reason": est["reason"] if est else f"no H4 result for benchmark '{benchmark}'",
        }
    if s.estimation_verdicts:
        note = (
            "estimation hypothesis (two-sided): estimated, imprecise (a group below precise_group_size) or "
            "not_estimable (a group below min_group_size); it makes no directional claim"
        )
        verdict = combine_estimation(v["verdict"] for v in per.values())
    else:
        note = (
            "estimation hypothesis: 'supported' means estimable with every group >= min_group_size; "
            "the two-sided estimate carries no direction"
        )
        verdict = combine_verdicts(v["verdict"] for v in per.values())
    return {"cells": per, "note": note, "verdict": verdict}


def interval_decides(block: dict) -> bool:
    """Whether a cell's interval may decide its criterion: not where the plan does not trust it (from
    plan version 3: a zero-width interval, or H5's few discordant minority-label problems)."""
    return block.get("ci_trusted", True)


def hypothesis_verdict(hypothesis: dict, cells: dict, h4: dict, holm: list[dict], s: Settings) -> dict:
    """The verdict of one registered hypothesis, with the numbers and both parts that decided it.

    An interval hypothesis records per cell its CI criterion and whether Holm rejects its members
    there (``holm_reject``, None without members); under the plan's verdict rule a cell is supported
    only when both hold (docs/reference.md section 5; seed 003 section 3.4).
    """
    hid = hypothesis.get("id", "?")
    criterion = plan_key(hypothesis, "criterion", where=f"hypothesis {hid}")
    kind = plan_key(criterion, "kind", where=f"hypothesis {hid}.criterion")
    statistic = plan_key(hypothesis, "statistic", where=f"hypothesis {hid}")
    if statistic not in STATISTICS:
        raise ValueError(f"hypothesis {hid}: unknown statistic '{statistic}' (known: {sorted(STATISTICS)})")
    block_id, estimate_key, ci_key = STATISTICS[statistic]
    entry = {"role": hypothesis.get("role"), "statistic": statistic, "criterion": criterion}
    if kind == "estimation":
        estimation = _estimation_entry(hid, hypothesis, h4, s, estimate_key, ci_key)
        entry.update(
            cells=estimation["cells"], min_group_size=h4_min_group_size([hypothesis], s), note=estimation["note"]
        )
        verdicts = [v["verdict"] for v in entry["cells"].values()]
        entry["cells_supported"] = f"{verdicts.count('supported')} of {len(verdicts)}"
        entry["verdict"] = estimation["verdict"]
        return entry
    per = {}
    for cell in hypothesis.get("cells", []):
        block = cells.get(cell, {}).get(block_id, {})
        ci = block.get(ci_key)
        ci_criterion = cell_verdict(criterion, ci) if interval_decides(block) else "not_estimable"
        holm_reject = holm_decision(hid, cell, holm)
        per[cell] = {
            "verdict": _with_holm(ci_criterion, holm_reject, s),
            "ci_criterion": ci_criterion,
            "holm_reject": holm_reject,
            "estimate": block.get(estimate_key),
            "ci": ci if ci is not None else [None, None],
            "ci_n_kept": block.get("ci_n_kept"),
            "flags": block.get("flags", []),
            "reason": block.get("reason"),
        }
    entry["cells"] = per
    verdicts = [v["verdict"] for v in per.values()]
    entry["cells_supported"] = f"{verdicts.count('supported')} of {len(verdicts)}"
    entry["ci_criterion"] = combine_verdicts(v["ci_criterion"] for v in per.values())
    entry["holm_reject"] = holm_decision(hid, None, holm)
    entry["verdict_rule"] = list(s.supported_requires)
    entry["verdict"] = combine_verdicts(verdicts)
    return entry
