"""Problem-level statistics of the registered analysis (seed 003 section 3.4; docs/reference.md section 5).

The primary inferential object is a 95% percentile bootstrap interval over problem-level
resamples. Every bootstrap here is vectorized: one (resamples, n) index matrix drawn from
``numpy.random.default_rng(seed)``, and each statistic is evaluated on all resample rows at once,
as a function of how many problems of each category (flag x label, rank tier x label) a row holds.
Point estimates are the same functions applied to the one-row matrix ``full_sample(n)``.
A resample in which a statistic is undefined (an empty group, a constant vector) yields NaN; NaNs
are dropped before the percentiles are taken and the number kept is reported with the interval.

scipy is imported inside the tests that call it: it takes a second to load, and most rules' jobs
import this module without running a test (docs/developer-notes.md).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval; ``lo``/``hi`` are None when no resample was defined."""

    lo: float | None
    hi: float | None
    n_kept: int
    n_resamples: int

    def as_list(self) -> list[float | None]:
        return [self.lo, self.hi]


def finite_or_none(x) -> float | None:
    """A finite float, or None for an undefined value (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def derive_seed(seed: int, *labels: str) -> int:
    """A 64-bit seed for one named stream of the run seed.

    Each cell gets its own resample stream so that the per-cell bootstraps H4 combines are
    independent even when two cells have the same number of problems.
    """
    digest = hashlib.sha256("/".join([str(seed), *labels]).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """The (resamples, n) matrix of problem indices drawn with replacement."""
    if n < 1:
        raise ValueError(f"cannot resample an empty sample (n={n})")
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def cell_resamples(seed: int, cell: str, n: int, resamples: int) -> np.ndarray:
    """The problem-resample index matrix of one cell: common random numbers for all its statistics.

    Every bootstrap of a cell (H1-H3, H5's test split, the epsilon sweep, early exit, the
    exploratory CIs) reads this one matrix over the cell's usable problems, in problem order, so
    the rows of a table are paired comparisons: two statistics that agree on every problem get
    identical intervals (seed 003 section 3.4; docs/reference.md section 5). Cells keep separate
    streams, so the per-cell bootstraps H4 combines stay independent.
    """
    return resample_indices(n, resamples, derive_seed(seed, cell))


def stratified_split_resamples(idx: np.ndarray, member: np.ndarray, stratum: np.ndarray, seed: int) -> np.ndarray:
    """Resamples of a split that was drawn from a cell stratified on ``stratum``, one per row of the
    cell's matrix ``idx``, each of the split's size.

    A resample is drawn as the split was: row r's own stratum share fixes how many of the split's
    problems come from the stratum (the cell is itself a sample, so its share varies), and each
    part is drawn with replacement from the split's problems of that stratum (the split holds the
    cell's share fixed). Resampling the split unstratified instead varies the share as a sample of
    the split's size would, which is wider than the stratified split varies (docs/reference.md section 5,
    H5). Entries are cell indices of members; ``seed`` seeds the draws within each part.
    """
    member, stratum = np.asarray(member, dtype=bool), np.asarray(stratum, dtype=bool)
    inside, outside = np.flatnonzero(member & stratum), np.flatnonzero(member & ~stratum)
    size = inside.size + outside.size
    n_inside = np.rint(stratum[idx].mean(axis=1) * size).astype(np.int64)
    n_inside = np.where(outside.size == 0, size, np.where(inside.size == 0, 0, n_inside))
    rng = np.random.default_rng(seed)

    def draws(part: np.ndarray) -> np.ndarray:
        if part.size == 0:  # never chosen: n_inside keeps every draw in the other part
            return np.zeros((idx.shape[0], size), dtype=np.int64)
        return part[rng.integers(0, part.size, size=(idx.shape[0], size))]

    from_inside, from_outside = draws(inside), draws(outside)
    return np.where(np.arange(size)[None, :] < n_inside[:, None], from_inside, from_outside)


def accepted_share(tiers: np.ndarray, k: int) -> np.ndarray:
    """Each item's chance of being among the k accepted by tier under uniform random tie-breaking:
    1 above the cut tier, the tier's accepted share in it, 0 below (seed 003 section 4.5)."""
    tiers = np.asarray(tiers, dtype=np.int64)
    per_tier = np.bincount(tiers)
    before = np.cumsum(per_tier) - per_tier
    accepted = np.clip(k - before, 0, per_tier)
    return (accepted / np.maximum(per_tier, 1))[tiers]


def percentile_interval(values: np.ndarray, level: float, quantile_rule: str = "linear") -> Interval:
    """Percentile interval of the defined (finite) resample values; NaNs are dropped and counted.
    ``quantile_rule`` is numpy.quantile's method (plan analysis.bootstrap.quantile_rule)."""
    values = np.asarray(values, dtype=float)
    kept = values[np.isfinite(values)]
    if kept.size == 0:
        return Interval(None, None, 0, int(values.size))
    alpha = 1.0 - level
    lo, hi = np.quantile(kept, [alpha / 2, 1 - alpha / 2], method=quantile_rule)
    return Interval(float(lo), float(hi), int(kept.size), int(values.size))


def category_counts(codes: np.ndarray, idx: np.ndarray, n_codes: int) -> np.ndarray:
    """(resamples, n_codes): how many problems of each category every resample row holds.

    Every resampled statistic below is a function of these counts, so a whole bootstrap costs one
    gather and one bincount over the index matrix instead of one pass per resample.
    """
    rows = idx.shape[0]
    flat = np.asarray(codes, dtype=np.int64)[idx]
    flat += (np.arange(rows, dtype=np.int64) * n_codes)[:, None]
    return np.bincount(flat.ravel(), minlength=rows * n_codes).reshape(rows, n_codes)


def full_sample(n: int) -> np.ndarray:
    """The index matrix whose single row is the sample itself, for point estimates."""
    return np.arange(n)[None, :]


def group_accuracy_rows(flag: np.ndarray, correct: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy inside and outside the flagged group in each resample row; NaN where a group is empty."""
    codes = 2 * np.asarray(flag, dtype=np.int64) + np.asarray(correct, dtype=np.int64)
    counts = category_counts(codes, idx, 4)  # (unflagged wrong, unflagged right, flagged wrong, flagged right)
    n_out, n_in = counts[:, 0] + counts[:, 1], counts[:, 2] + counts[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        acc_in = np.where(n_in > 0, counts[:, 3] / np.maximum(n_in, 1), np.nan)
        acc_out = np.where(n_out > 0, counts[:, 1] / np.maximum(n_out, 1), np.nan)
    return acc_in, acc_out


def accuracy_gap_rows(flag: np.ndarray, correct: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Accuracy of flagged minus unflagged problems per resample row (seed 003 section 3.4, H1)."""
    acc_in, acc_out = group_accuracy_rows(flag, correct, idx)
    return acc_in - acc_out


def accuracy_gap(flag: np.ndarray, correct: np.ndarray) -> float:
    return float(accuracy_gap_rows(flag, correct, full_sample(len(flag)))[0])


def constant_reason(name: str, values: np.ndarray) -> str | None:
    """Why a statistic over ``values`` is not an estimate: every usable problem has the same value."""
    values = np.asarray(values, dtype=float)
    if values.size and values.min() == values.max():
        return f"{name} is constant ({values[0]:g}) over the {values.size} usable problems"
    return None


def small_groups(sizes: dict[str, int], min_group_size: int | None) -> str | None:
    """The plan's small-group rule (analysis.groups.min_group_size): why an estimate resting on these
    groups is null, or None when every group is large enough (or the plan registers no rule)."""
    if min_group_size is None:
        return None
    small = [f"{size} {name}" for name, size in sizes.items() if size < min_group_size]
    return f"{', '.join(small)} (< min_group_size {min_group_size}): not an estimate" if small else None


def gap_undefined(monotone: np.ndarray, correct: np.ndarray) -> list[str]:
    """Why the accuracy gap (monotone minus non-monotone) is not defined on these usable problems:
    an empty group, or a constant label (the gap is then 0 by construction, not an estimate)."""
    monotone = np.asarray(monotone, dtype=bool)
    n, n_mono = int(monotone.size), int(monotone.sum())
    notes = []
    if n_mono == 0:
        notes.append("no monotone chains")
    if n_mono == n:
        notes.append("no non-monotone chains")
    return notes + [r for r in [constant_reason("correct", np.asarray(correct, dtype=float))] if r]


def gap_pp(
    monotone: np.ndarray, correct: np.ndarray, min_group_size: int | None, n_excluded: int = 0
) -> tuple[float | None, str | None]:
    """The one definition of a cell's reported accuracy gap in percentage points (H1's point
    estimate, summary.json, the sweeps and the panel table): (gap, None), or (None, the reason)
    when it is not an estimate: no usable problems, an empty group, a constant label, or a group
    below the plan's min_group_size."""
    monotone = np.asarray(monotone, dtype=bool)
    n, n_mono = int(monotone.size), int(monotone.sum())
    if n == 0:
        return None, f"no usable problems ({n_excluded} of {n + n_excluded} excluded)"
    notes = gap_undefined(monotone, correct)
    small = None if notes else small_groups({"monotone": n_mono, "non-monotone": n - n_mono}, min_group_size)
    notes += [small] if small else []
    if notes:
        return None, "; ".join(notes)
    gap = 100 * accuracy_gap(monotone, np.asarray(correct, dtype=bool))
    return (float(gap), None) if np.isfinite(gap) else (None, "the gap is not finite")


def spearman_binary_rows(x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Spearman rho of x against a binary y in each resample row, average ranks for ties.

    With y binary its ranks are an increasing affine map of y, so rho is the Pearson correlation
    of x's within-row average ranks with y. A row's ranks follow from its count of each distinct x
    value: rank = (count below) + (ties + 1) / 2. NaN where either resampled vector is constant,
    since a rank correlation with a constant is undefined.
    """
    distinct, tier = np.unique(np.asarray(x, dtype=float), return_inverse=True)
    n_tiers = distinct.size
    codes = 2 * tier.reshape(-1) + np.asarray(y, dtype=np.int64)
    counts = category_counts(codes, idx, 2 * n_tiers).reshape(idx.shape[0], n_tiers, 2)
    y_per_tier = counts[:, :, 1].astype(float)
    per_tier = counts[:, :, 0] + y_per_tier
    n = idx.shape[1]
    # Centred rank of each tier: (count below) + (ties + 1) / 2 - (n + 1) / 2, built in place.
    # A constant row puts all n items in one tier, whose centred rank is exactly 0, so sxx == 0.
    centred = np.cumsum(per_tier, axis=1)
    centred -= 0.5 * per_tier
    centred -= 0.5 * n
    sxx = np.einsum("ij,ij,ij->i", per_tier, centred, centred)
    sxy = np.einsum("ij,ij->i", y_per_tier, centred)
    n_y = y_per_tier.sum(axis=1)
    syy = n_y * (n - n_y) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = sxy / np.sqrt(sxx * syy)
    return np.where((sxx == 0) | (syy == 0), np.nan, rho)


def spearman_binary(x: np.ndarray, y: np.ndarray) -> float:
    return float(spearman_binary_rows(x, y, full_sample(len(x)))[0])


def spearman_p(x: np.ndarray, y: np.ndarray, alternative: str) -> float:
    """scipy's Spearman p-value; NaN where either vector is constant."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 3 or x.min() == x.max() or y.min() == y.max():
        return float("nan")
    from scipy import stats as sps

    return float(sps.spearmanr(x, y, alternative=alternative).pvalue)


PERMUTATION_BATCH = 250  # permutations held at once by spearman_permutation_p (a panel cell's: some 3 MB an array)


def spearman_permutation_p(x: np.ndarray, y: np.ndarray, alternative: str, resamples: int, seed: int) -> float:
    """Permutation p-value of Spearman's rho (scipy.stats.permutation_test, pairings): valid at any n
    and with ties, where scipy's t approximation is not (issue 49). Randomized, it is
    (1 + #{null as extreme}) / (1 + resamples), scipy's convention; exact enumeration where
    n! <= resamples. NaN where either vector is constant.

    x and y are ranked once (average ranks): permuting the pairing permutes the ranks, so the
    statistic need not re-rank. It is sum((rank x - mean) * (rank y - mean)), which is rho times the
    permutation-invariant sqrt(sxx * syy): rho's order, hence its p-value, with sums of quarter-
    integers that are exact in floating point, so tied rhos tie exactly (tests/test_stats_permutation.py
    checks the p-values equal scipy's own spearman statistic)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 3 or x.min() == x.max() or y.min() == y.max():
        return float("nan")
    from scipy import stats as sps

    centred_x = sps.rankdata(x) - (x.size + 1) / 2
    centred_y = sps.rankdata(y) - (y.size + 1) / 2

    def cross_product(ranks_x: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.moveaxis(ranks_x, axis, -1) @ centred_y

    # in batches of PERMUTATION_BATCH: all 9,999 permutations of a panel cell at once hold some 300 MB;
    # scipy draws each batch's permutations from the one stream (not in place), and the statistic's
    # sums are exact, so the null distribution, hence the p-value, does not depend on the batch
    result = sps.permutation_test(
        (centred_x,), cross_product, permutation_type="pairings", vectorized=True,
        n_resamples=resamples, alternative=alternative, rng=np.random.default_rng(seed),
        batch=PERMUTATION_BATCH,
    )  # fmt: skip
    return float(result.pvalue)


def contingency_2x2(flag: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """[[flagged correct, flagged wrong], [unflagged correct, unflagged wrong]]."""
    flag = np.asarray(flag, dtype=bool)
    correct = np.asarray(correct, dtype=bool)
    return np.array(
        [
            [int((flag & correct).sum()), int((flag & ~correct).sum())],
            [int((~flag & correct).sum()), int((~flag & ~correct).sum())],
        ]
    )


def fisher_test(flag: np.ndarray, correct: np.ndarray, alternative: str) -> tuple[float, float]:
    """Sample odds ratio and Fisher exact p; ``greater``: flagged problems are more often correct."""
    from scipy import stats as sps

    result = sps.fisher_exact(contingency_2x2(flag, correct), alternative=alternative)
    return float(result.statistic), float(result.pvalue)


def holm(pvalues: list[float], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm-Bonferroni step-down: (reject, adjusted p) for a family of p-values, in the family's order.

    statsmodels' ``multipletests(method="holm")`` gives the same, bit for bit (tests/test_stats.py
    checks it over generated families), but ends with ``gc.collect()``: a full garbage collection
    on every call, 0.2 s in a process that holds a model (an audit computes Holm six times)."""
    p = np.asarray(pvalues, dtype=float)
    if not np.all(np.isfinite(p)):
        raise ValueError(f"Holm needs finite p-values, got {p.tolist()}")
    order = np.argsort(p)
    ranked, multipliers = p[order], np.arange(len(p), 0, -1)  # the k-th smallest p against alpha / (m - k + 1)
    failing = np.nonzero(ranked > alpha / multipliers)[0]
    kept_from = failing[0] if failing.size else len(p)  # step-down: every p from the first failing one is kept
    reject, adjusted = np.empty(len(p), dtype=bool), np.empty(len(p))
    reject[order] = np.arange(len(p)) < kept_from
    adjusted[order] = np.minimum(np.maximum.accumulate(ranked * multipliers), 1.0)
    return reject, adjusted


def descending_tiers(score: np.ndarray) -> np.ndarray:
    """Dense rank of each item by descending score: 0 for the highest score; equal scores share a tier."""
    _, inverse = np.unique(-np.asarray(score, dtype=float), return_inverse=True)
    return inverse.reshape(-1)


def accept_top_k(tiers: np.ndarray, k: int, draws: int, seed: int) -> np.ndarray:
    """(draws, n) acceptance masks: the k items ranked first by tier, ties broken by a seeded uniform.

    This is the exact-coverage rule of seed 003 section 4.5: exactly k items are accepted in every
    draw, and the uniform never inspects the outcome.
    """
    tiers = np.asarray(tiers)
    if not 0 < k <= tiers.size:
        raise ValueError(f"k must lie in 1..{tiers.size}, got {k}")
    uniform = np.random.default_rng(seed).random((draws, tiers.size))
    order = np.lexsort((uniform, np.broadcast_to(tiers, uniform.shape)), axis=-1)
    accepted = np.zeros(uniform.shape, dtype=bool)
    np.put_along_axis(accepted, order[:, :k], True, axis=1)
    return accepted


def accuracy_at_k_draws(tiers: np.ndarray, correct: np.ndarray, k: int, draws: int, seed: int) -> float:
    """Accuracy of the exactly-k accepted items, averaged over the seeded tie-breaking draws."""
    accepted = accept_top_k(tiers, k, draws, seed)
    return float((accepted & np.asarray(correct, dtype=bool)).sum(axis=1).mean() / k)


def exact_coverage_rows(
    tiers: np.ndarray, flag: np.ndarray, correct: np.ndarray, idx: np.ndarray, member: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per resample row: accuracy of the flagged items, and the expected accuracy of the top
    k = (flagged count) items by tier under uniform random tie-breaking (seed 003 section 4.5).

    ``member`` (optional) marks the items that belong to the sample: a row then holds only the
    draws of members, so a cell's resample matrix serves a subset of its problems (H5's test split).
    Non-members carry any tier, flag and label; they are never counted.

    The tiers strictly above the cut are accepted whole; the cut tier contributes its accepted
    count times its accuracy. This is the limit of ``accuracy_at_k_draws`` as draws grow. Both
    are NaN where the row has no flagged item.
    """
    n_tiers = int(np.max(tiers)) + 1
    codes = 4 * np.asarray(tiers, dtype=np.int64) + 2 * np.asarray(flag, dtype=np.int64)
    codes += np.asarray(correct, dtype=np.int64)
    if member is not None:
        codes = np.where(np.asarray(member, dtype=bool), codes, 4 * n_tiers)  # one discarded slot
    counts = category_counts(codes, idx, 4 * n_tiers + 1)[:, : 4 * n_tiers].reshape(idx.shape[0], n_tiers, 4)
    per_tier = counts.sum(axis=2)
    right_per_tier = counts[:, :, 1] + counts[:, :, 3]
    k = counts[:, :, 2:].sum(axis=(1, 2))
    accepted = np.clip(k[:, None] - (np.cumsum(per_tier, axis=1) - per_tier), 0, per_tier)
    share = np.divide(right_per_tier, per_tier, out=np.zeros(per_tier.shape), where=per_tier > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        acc_top_k = np.where(k > 0, (accepted * share).sum(axis=1) / np.maximum(k, 1), np.nan)
        acc_flag = np.where(k > 0, counts[:, :, 3].sum(axis=1) / np.maximum(k, 1), np.nan)
    return acc_flag, acc_top_k
