"""The per-cell hypotheses H1, H2 and H3 (seed 003 sections 3.4, 4.1-4.3); H5 is in ``h5``.

Each takes one cell's usable problems (``CellData``) and returns its block of hypotheses.json:
the estimate, its bootstrap CI, the test's p-value, and a reason whenever a value is null.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cotdyn import stats
from cotdyn.analysis.hypotheses.inputs import CellData, Settings
from cotdyn.stats import Interval

H3_BUCKETS = ("0", "1", "2", ">=3")

MISSING_CELL = "cell missing from the records"


def _num(x: Any) -> float | None:
    """A finite float, or None for an undefined value."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _ci_fields(interval: Interval) -> dict:
    return {"ci": interval.as_list(), "ci_n_kept": interval.n_kept, "ci_resamples": interval.n_resamples}


def _reason(notes: list[str]) -> str | None:
    return "; ".join(notes) if notes else None


def kept_flags(interval: Interval, s: Settings) -> list[str]:
    """A flag when the bootstrap kept fewer than the plan's min_kept_fraction of its resamples
    (a resample is dropped where the statistic is undefined, so the CI is conditional on the rest)."""
    if s.min_kept_fraction is None or interval.lo is None or interval.n_resamples == 0:
        return []
    if interval.n_kept < s.min_kept_fraction * interval.n_resamples:
        return [
            f"bootstrap kept {interval.n_kept} of {interval.n_resamples} resamples "
            f"(< min_kept_fraction {s.min_kept_fraction:g})"
        ]
    return []


def zero_width_rule(interval: Interval, s: Settings) -> dict:
    """Under plan version 3 (analysis.degenerate: not_estimable) an interval [x, x] is a value fixed
    by construction, not a precise estimate: it is flagged and decides no verdict (``ci_trusted``)."""
    if s.degenerate != "not_estimable":
        return {}
    if interval.lo is not None and interval.lo == interval.hi:
        flag = f"not estimable: zero-width interval [{interval.lo:g}, {interval.hi:g}], a value fixed by construction"
        return {"ci_trusted": False, "flags": [flag]}
    return {"ci_trusted": True, "flags": []}


def group_rule(sizes: dict[str, int], s: Settings) -> tuple[str | None, list[str]]:
    """The plan's small-group rule for one statistic (analysis.groups): a reason when a group it rests
    on is below min_group_size (the estimate is null), and an ``imprecise`` flag when one is below
    precise_group_size. Plan version 1 registers no such rule."""
    if s.min_group_size is None:
        return None, []
    small = stats.small_groups(sizes, s.min_group_size)
    if small:
        return small, []
    loose = [f"{size} {name}" for name, size in sizes.items() if size < s.precise_group_size]
    return None, [f"imprecise: {', '.join(loose)} (< precise_group_size {s.precise_group_size})"] if loose else []


_constant_reason = stats.constant_reason


def h1_shape_contrast(d: CellData, idx: np.ndarray | None, s: Settings) -> tuple[dict, np.ndarray | None]:
    """H1: accuracy gap monotone minus non-monotone (pp), its bootstrap CI, odds ratio and
    one-sided Fisher p (seed 003 sections 3.4 and 4.1). Also returns the gap resamples for H4.
    Null, with the reason, when a group is empty or every usable problem has the same label."""
    n_mono = int(d.monotone.sum())
    acc_in, acc_out = stats.group_accuracy_rows(d.monotone, d.correct, stats.full_sample(d.n))
    # the gap and its reason are stats.gap_pp's, the one definition summary.json and the sweeps share
    gap, gap_reason = stats.gap_pp(d.monotone, d.correct, s.min_group_size, d.n_excluded)
    notes = [gap_reason] if gap_reason else []
    # a constant label makes the gap 0 by construction, not an estimate (nor its CI [0, 0])
    defined = d.n and not stats.gap_undefined(d.monotone, d.correct)
    _, flags = group_rule({"monotone": n_mono, "non-monotone": d.n - n_mono}, s) if defined else (None, [])
    # The exact test stays valid on a small group; the gap and its CI are not estimates there.
    estimated = gap is not None
    resamples = None
    interval = Interval(None, None, 0, 0)
    odds_ratio = p_fisher = None
    if estimated:
        resamples = 100 * stats.accuracy_gap_rows(d.monotone, d.correct, idx)
        interval = stats.percentile_interval(resamples, s.level)
        flags += kept_flags(interval, s)
    elif idx is not None:
        interval = Interval(None, None, 0, idx.shape[0])
    zero_width = zero_width_rule(interval, s)
    if defined:
        odds_ratio, p_fisher = stats.fisher_test(d.monotone, d.correct, s.alternatives["fisher"])
        if not math.isfinite(odds_ratio):
            notes.append("odds ratio undefined or infinite (a zero cell in the 2x2 table)")
    return {
        "n": d.n,
        "n_excluded": d.n_excluded,
        "n_monotone": n_mono,
        "n_non_monotone": d.n - n_mono,
        "coverage": _num(n_mono / d.n) if d.n else None,
        "accuracy": _num(d.correct.mean()) if d.n else None,
        "accuracy_monotone": _num(acc_in[0]) if d.n else None,
        "accuracy_non_monotone": _num(acc_out[0]) if d.n else None,
        "gap_pp": gap,
        **_ci_fields(interval),
        "odds_ratio": _num(odds_ratio),
        "p_fisher": _num(p_fisher),
        "flags": flags + zero_width.pop("flags", []),
        "reason": _reason(notes),
        **zero_width,
    }, resamples


def _spearman_block(
    x: np.ndarray, correct: np.ndarray, idx: np.ndarray | None, s: Settings, name: str, alternative: str
) -> dict:
    reason = None if x.size >= 3 else f"{x.size} usable problems (a rank correlation needs >= 3)"
    reason = reason or _constant_reason(name, x) or _constant_reason("correct", correct.astype(float))
    block = {
        "rho": None,
        "ci": [None, None],
        "ci_n_kept": 0,
        "ci_resamples": s.resamples,
        "p_spearman": None,
        "alternative": alternative,
        "n": int(x.size),
        "flags": [],
        "reason": reason,
    }
    if reason:
        return block
    # The test stays defined on a small group; rho and its CI are not estimates there.
    block["p_spearman"] = _num(stats.spearman_p(x, correct, alternative))
    n_correct = int(correct.sum())
    small, flags = group_rule({"correct": n_correct, "incorrect": int(x.size) - n_correct}, s)
    if small:
        return block | {"reason": small}
    interval = stats.percentile_interval(stats.spearman_binary_rows(x, correct, idx), s.level)
    zero_width = zero_width_rule(interval, s)
    return block | {
        "rho": _num(stats.spearman_binary(x, correct)),
        **_ci_fields(interval),
        "flags": flags + kept_flags(interval, s) + zero_width.pop("flags", []),
        **zero_width,
    }


def h2_magnitude_null(d: CellData, idx: np.ndarray | None, s: Settings) -> dict:
    """H2: Spearman rho of coherence C = H_0 - H_N with correctness, with CI (seed 003 section 4.2)."""
    return _spearman_block(d.coherence, d.correct, idx, s, "coherence", s.alternatives["H2"])


def violation_buckets(violations: np.ndarray, correct: np.ndarray, s: Settings | None = None) -> list[dict]:
    """Accuracy by violation count 0, 1, 2, >=3 (seed 003 section 4.3); an empty bucket has no accuracy,
    nor has one below the plan's min_group_size (with its reason), and one below precise_group_size
    is flagged."""
    bucket = np.minimum(violations, 3).astype(int)
    out = []
    for b, label in enumerate(H3_BUCKETS):
        members = bucket == b
        n = int(members.sum())
        row = {"bucket": label, "n": n, "accuracy": _num(correct[members].mean()) if n else None}
        if s is not None and s.min_group_size is not None:
            small, flags = group_rule({"problems": n}, s)
            row.update(accuracy=None if small else row["accuracy"], flags=flags, reason=small)
        out.append(row)
    return out


def h3_graded_signal(d: CellData, idx: np.ndarray | None, s: Settings) -> dict:
    """H3: Spearman rho of the violation count with correctness, with CI, and accuracy by bucket
    (seed 003 section 4.3)."""
    block = _spearman_block(d.violations, d.correct, idx, s, "violations", s.alternatives["H3"])
    block["buckets"] = violation_buckets(d.violations, d.correct, s)
    return block
