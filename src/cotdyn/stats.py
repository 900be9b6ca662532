"""Problem-level statistics of the registered analysis (seed 003 section 3.4; DESIGN section 5).

The primary inferential object is a 95% percentile bootstrap interval over problem-level
resamples. Every bootstrap here is vectorized: one (resamples, n) index matrix drawn from
``numpy.random.default_rng(seed)``, and each statistic is evaluated on all resample rows at once.
A resample in which a statistic is undefined (an empty group, a constant vector) yields NaN; NaNs
are dropped before the percentiles are taken and the number kept is reported with the interval.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval; ``lo``/``hi`` are None when no resample was defined."""

    lo: float | None
    hi: float | None
    n_kept: int
    n_resamples: int

    def scaled(self, factor: float) -> "Interval":
        if self.lo is None:
            return self
        return Interval(self.lo * factor, self.hi * factor, self.n_kept, self.n_resamples)

    def as_list(self) -> list[float | None]:
        return [self.lo, self.hi]


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


def percentile_interval(values: np.ndarray, level: float) -> Interval:
    """Percentile interval of the defined (finite) resample values; NaNs are dropped and counted."""
    values = np.asarray(values, dtype=float)
    kept = values[np.isfinite(values)]
    if kept.size == 0:
        return Interval(None, None, 0, int(values.size))
    alpha = 1.0 - level
    lo, hi = np.quantile(kept, [alpha / 2, 1 - alpha / 2])
    return Interval(float(lo), float(hi), int(kept.size), int(values.size))


def group_accuracy_rows(flag_rows: np.ndarray, correct_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy inside and outside the flagged group for each row; NaN where a group is empty."""
    flag = np.atleast_2d(np.asarray(flag_rows, dtype=bool))
    correct = np.atleast_2d(np.asarray(correct_rows, dtype=bool))
    n_in = flag.sum(axis=1)
    n_out = flag.shape[1] - n_in
    c_in = (flag & correct).sum(axis=1)
    c_out = correct.sum(axis=1) - c_in
    with np.errstate(divide="ignore", invalid="ignore"):
        acc_in = np.where(n_in > 0, c_in / np.maximum(n_in, 1), np.nan)
        acc_out = np.where(n_out > 0, c_out / np.maximum(n_out, 1), np.nan)
    return acc_in, acc_out


def accuracy_gap_rows(flag_rows: np.ndarray, correct_rows: np.ndarray) -> np.ndarray:
    """Accuracy of flagged minus unflagged problems, per row (seed 003 section 3.4, H1)."""
    acc_in, acc_out = group_accuracy_rows(flag_rows, correct_rows)
    return acc_in - acc_out


def accuracy_gap(flag: np.ndarray, correct: np.ndarray) -> float:
    return float(accuracy_gap_rows(flag, correct)[0])


def resample_ranks(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Average-tie ranks of ``values[idx]`` within each resample row, without sorting each row.

    A resample holds copies of the original items, so an item's rank in row b is the number of
    row-b items with a smaller value plus half of (its tie count + 1): one bincount per row over
    the distinct values of the full sample, then a cumulative sum. Equals
    ``scipy.stats.rankdata(values[idx], axis=1)``.
    """
    distinct, tier = np.unique(np.asarray(values, dtype=float), return_inverse=True)
    tier = tier.reshape(-1)
    n_rows, n_tiers = idx.shape[0], distinct.size
    flat = (np.arange(n_rows)[:, None] * n_tiers + tier[idx]).ravel()
    count = np.bincount(flat, minlength=n_rows * n_tiers).reshape(n_rows, n_tiers)
    rank_of_tier = np.cumsum(count, axis=1) - count + (count + 1) / 2.0
    return np.take_along_axis(rank_of_tier, tier[idx], axis=1)


def spearman_resamples(x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Spearman rho of x against y within each resample row: Pearson of average-tie ranks.

    NaN where either resampled vector is constant, since a rank correlation with a constant is
    undefined. ``idx = np.arange(n)[None]`` gives the full-sample rho.
    """
    rx = resample_ranks(x, idx)
    ry = resample_ranks(y, idx)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    sxx = (rx * rx).sum(axis=1)
    syy = (ry * ry).sum(axis=1)
    # A constant row has all ranks equal to (n + 1) / 2, so its centred ranks are exactly zero.
    constant = (sxx == 0) | (syy == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (rx * ry).sum(axis=1) / np.sqrt(sxx * syy)
    return np.where(constant, np.nan, rho)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    x = np.asarray(x)
    return float(spearman_resamples(x, y, np.arange(x.size)[None, :])[0])


def spearman_p(x: np.ndarray, y: np.ndarray, alternative: str) -> float:
    """scipy's Spearman p-value; NaN where either vector is constant."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 3 or x.min() == x.max() or y.min() == y.max():
        return float("nan")
    return float(sps.spearmanr(x, y, alternative=alternative).pvalue)


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


def fisher_greater(flag: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
    """Sample odds ratio and one-sided Fisher exact p that flagged problems are more often correct."""
    result = sps.fisher_exact(contingency_2x2(flag, correct), alternative="greater")
    return float(result.statistic), float(result.pvalue)


def holm(pvalues: list[float], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm-Bonferroni step-down: (reject, adjusted p) for a family of p-values."""
    p = np.asarray(pvalues, dtype=float)
    if not np.all(np.isfinite(p)):
        raise ValueError(f"Holm needs finite p-values, got {p.tolist()}")
    reject, p_adjusted, _, _ = multipletests(p, alpha=alpha, method="holm")
    return reject, p_adjusted


def descending_tiers(score: np.ndarray) -> np.ndarray:
    """Dense rank of each item by descending score: 0 for the highest score; equal scores share a tier."""
    _, inverse = np.unique(-np.asarray(score, dtype=float), return_inverse=True)
    return inverse.reshape(-1)


def accuracy_at_k_draws(tiers: np.ndarray, correct: np.ndarray, k: int, draws: int, seed: int) -> float:
    """Accuracy of the k items ranked first by tier, ties broken by a seeded uniform, averaged over draws.

    This is the exact-coverage rule of seed 003 section 4.5: exactly k items are accepted in every
    draw, and the uniform never inspects the outcome.
    """
    tiers = np.asarray(tiers)
    correct = np.asarray(correct, dtype=bool)
    if not 0 < k <= tiers.size:
        raise ValueError(f"k must lie in 1..{tiers.size}, got {k}")
    uniform = np.random.default_rng(seed).random((draws, tiers.size))
    order = np.lexsort((uniform, np.broadcast_to(tiers, uniform.shape)), axis=-1)
    return float(correct[order[:, :k]].mean(axis=1).mean())


def accuracy_at_k_expected_rows(
    tiers: np.ndarray, correct: np.ndarray, idx: np.ndarray, k_rows: np.ndarray
) -> np.ndarray:
    """Expected accuracy of the top k_rows[b] items of resample b under uniform random tie-breaking.

    The tiers strictly above the cut are accepted whole; the cut tier contributes its accepted
    count times its accuracy. This is the limit of ``accuracy_at_k_draws`` as draws grow, computed
    for all resample rows at once; NaN where k is 0.
    """
    tiers = np.asarray(tiers)
    correct = np.asarray(correct, dtype=float)
    n_rows = idx.shape[0]
    n_tiers = int(tiers.max()) + 1
    flat = (np.arange(n_rows)[:, None] * n_tiers + tiers[idx]).ravel()
    size = n_rows * n_tiers
    count = np.bincount(flat, minlength=size).reshape(n_rows, n_tiers)
    n_correct = np.bincount(flat, weights=correct[idx].ravel(), minlength=size).reshape(n_rows, n_tiers)
    above = np.cumsum(count, axis=1) - count
    k_rows = np.asarray(k_rows)
    accepted = np.clip(k_rows[:, None] - above, 0, count)
    share = np.divide(n_correct, count, out=np.zeros_like(n_correct), where=count > 0)
    expected = (accepted * share).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(k_rows > 0, expected / np.maximum(k_rows, 1), np.nan)
