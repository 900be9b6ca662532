"""The per-cell hypotheses H1, H2 and H3 (seed 003 sections 3.4, 4.1-4.3); H5 is in ``h5``.

Each takes one cell's usable problems (``CellData``) and returns its block of hypotheses.json:
the estimate, its bootstrap CI, the test's p-value, and a reason whenever a value is null.
"""

from __future__ import annotations

import math

import numpy as np

from cotdyn import stats
from cotdyn.analysis.hypotheses.inputs import CellData, Settings
from cotdyn.stats import Interval, finite_or_none

H3_BUCKETS = ("0", "1", "2", ">=3")

MISSING_CELL = "cell missing from the records"


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


# The bound of each statistic's range: a zero-width interval there is perfect separation (plan
# verdict_rule.perfect_separation), the data's answer rather than a value fixed by construction.
RANGE_BOUNDS = {"H1": 100.0, "H2": 1.0, "H3": 1.0}


def zero_width_rule(interval: Interval, s: Settings, hid: str = "H1") -> dict:
    """Under verdict_rule.degenerate: not_estimable (plan version 3 on) an interval [x, x] of a
    hypothesis in verdict_rule.zero_width (v3: H1-H4; v4: H1-H5) is a value fixed by construction,
    not a precise estimate: it is flagged and decides no verdict (``ci_trusted``). Under
    verdict_rule.perfect_separation: estimate (v4), one at the bound of the statistic's range (a gap
    of +-100 pp, a rho of +-1; its groups already passed min_group_size, or there is no interval) is
    perfect separation: kept as an estimate, with the reason, and decided by its criterion."""
    if s.degenerate != "not_estimable" or hid not in s.zero_width:
        return {}
    if interval.lo is None or interval.lo != interval.hi:
        return {"ci_trusted": True, "flags": []}
    bound = RANGE_BOUNDS.get(hid)
    if s.perfect_separation == "estimate" and bound is not None and abs(interval.lo) == bound:
        return {
            "ci_trusted": True,
            "flags": [],
            "separation": f"perfect separation: every resample gives {interval.lo:g}, the bound of the "
            "statistic's range (its groups are at least min_group_size): an estimate, decided by its criterion",
        }
    flag = f"not estimable: zero-width interval [{interval.lo:g}, {interval.hi:g}], a value fixed by construction"
    return {"ci_trusted": False, "flags": [flag]}


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
        interval = stats.percentile_interval(resamples, s.level, s.quantile_rule)
        flags += kept_flags(interval, s)
    elif idx is not None:
        interval = Interval(None, None, 0, idx.shape[0])
    zero_width = zero_width_rule(interval, s, "H1")
    if "separation" in zero_width:
        notes.append(zero_width.pop("separation"))
    if defined:
        odds_ratio, p_fisher = stats.fisher_test(d.monotone, d.correct, s.alternatives["fisher"])
        if not math.isfinite(odds_ratio):
            notes.append("odds ratio undefined or infinite (a zero cell in the 2x2 table)")
    return {
        "n": d.n,
        "n_excluded": d.n_excluded,
        "n_monotone": n_mono,
        "n_non_monotone": d.n - n_mono,
        "coverage": finite_or_none(n_mono / d.n) if d.n else None,
        "accuracy": finite_or_none(d.correct.mean()) if d.n else None,
        "accuracy_monotone": finite_or_none(acc_in[0]) if d.n else None,
        "accuracy_non_monotone": finite_or_none(acc_out[0]) if d.n else None,
        "gap_pp": gap,
        **_ci_fields(interval),
        "odds_ratio": finite_or_none(odds_ratio),
        "p_fisher": finite_or_none(p_fisher),
        "flags": flags + zero_width.pop("flags", []),
        "reason": _reason(notes),
        **zero_width,
    }, resamples


def spearman_test_p(x: np.ndarray, correct: np.ndarray, alternative: str, test: dict, cell: str, hid: str):
    """The Spearman p-value as the plan computes it (analysis.p_values.spearman_tests): scipy's t
    approximation, or (plan version 4, H3) a permutation test seeded per cell and hypothesis."""
    if test["kind"] == "permutation":
        seed = stats.derive_seed(test["seed"], cell, f"{hid} permutation")
        return stats.spearman_permutation_p(x, correct, alternative, test["resamples"], seed)
    return stats.spearman_p(x, correct, alternative)


def _spearman_block(x: np.ndarray, d: CellData, idx: np.ndarray | None, s: Settings, name: str, hid: str) -> dict:
    correct, alternative = d.correct, s.alternatives[hid]
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
    block["p_spearman"] = finite_or_none(spearman_test_p(x, correct, alternative, s.spearman_tests[hid], d.cell, hid))
    n_correct = int(correct.sum())
    small, flags = group_rule({"correct": n_correct, "incorrect": int(x.size) - n_correct}, s)
    if small:
        return block | {"reason": small}
    interval = stats.percentile_interval(stats.spearman_binary_rows(x, correct, idx), s.level, s.quantile_rule)
    zero_width = zero_width_rule(interval, s, hid)
    separation = zero_width.pop("separation", None)
    return block | {
        "rho": finite_or_none(stats.spearman_binary(x, correct)),
        **_ci_fields(interval),
        "flags": flags + kept_flags(interval, s) + zero_width.pop("flags", []),
        **({"reason": separation} if separation else {}),
        **zero_width,
    }


def h2_magnitude_null(d: CellData, idx: np.ndarray | None, s: Settings) -> dict:
    """H2: Spearman rho of coherence C = H_0 - H_N with correctness, with CI (seed 003 section 4.2)."""
    return _spearman_block(d.coherence, d, idx, s, "coherence", "H2")


def violation_buckets(violations: np.ndarray, correct: np.ndarray, s: Settings | None = None) -> list[dict]:
    """Accuracy by violation count 0, 1, 2, >=3 (seed 003 section 4.3); an empty bucket has no accuracy,
    nor has one below the plan's min_group_size (with its reason), and one below precise_group_size
    is flagged."""
    bucket = np.minimum(violations, 3).astype(int)
    out = []
    for b, label in enumerate(H3_BUCKETS):
        members = bucket == b
        n = int(members.sum())
        row = {"bucket": label, "n": n, "accuracy": finite_or_none(correct[members].mean()) if n else None}
        if s is not None and s.min_group_size is not None:
            small, flags = group_rule({"problems": n}, s)
            row.update(accuracy=None if small else row["accuracy"], flags=flags, reason=small)
        out.append(row)
    return out


def h3_graded_signal(d: CellData, idx: np.ndarray | None, s: Settings) -> dict:
    """H3: Spearman rho of the violation count with correctness, with CI, and accuracy by bucket
    (seed 003 section 4.3)."""
    block = _spearman_block(d.violations, d, idx, s, "violations", "H3")
    block["buckets"] = violation_buckets(d.violations, d.correct, s)
    return block
