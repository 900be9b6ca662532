"""stats.spearman_permutation_p, H3's p-value from plan version 4 (issue 49): checked against
scipy.stats.permutation_test with scipy's own Spearman statistic, against exact enumeration at small n,
against the p-value formula the plan states, and for its size under the null with ties, where scipy's
t approximation rejects too often."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from cotdyn import stats


def _scipy_reference(x, y, alternative, resamples, seed):
    """The same test with scipy's spearmanr as the statistic, re-ranking every permutation."""
    return sps.permutation_test(
        (x,), lambda xs: sps.spearmanr(xs, y).statistic, permutation_type="pairings", vectorized=False,
        n_resamples=resamples, alternative=alternative, rng=np.random.default_rng(seed),
    )  # fmt: skip


def _tied(n, accuracy, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4, n).astype(float), rng.random(n) < accuracy


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
@pytest.mark.parametrize("case", range(4))
def test_equals_scipy_permutation_test_with_its_own_spearman_statistic(alternative, case):
    """Ranking once and permuting the centred ranks' cross product gives scipy's p-values exactly,
    ties included, for a binary y (H3) and a y with ties of its own."""
    x, y = _tied(40 + 7 * case, (0.1, 0.5, 0.8, 0.3)[case], case)
    if case == 3:
        y = np.random.default_rng(9).integers(0, 5, x.size).astype(float)
    y = y.astype(float)
    seed = 100 + case
    reference = _scipy_reference(x, y, alternative, 999, seed).pvalue
    assert stats.spearman_permutation_p(x, y, alternative, 999, seed) == reference


@pytest.mark.parametrize("n", [5, 6])
def test_small_n_is_exact_enumeration(n):
    """n! <= resamples: every permutation is enumerated, p = #{rho_perm <= rho} / n!."""
    x = np.array([0.0, 1.0, 1.0, 2.0, 0.0, 3.0][:n])
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0][:n])
    observed = sps.spearmanr(x, y).statistic
    null = np.array([sps.spearmanr(x[list(p)], y).statistic for p in itertools.permutations(range(n))])
    exact = np.mean(null <= observed + 1e-12)
    assert math.factorial(n) <= 9999
    assert stats.spearman_permutation_p(x, y, "less", 9999, 1) == pytest.approx(exact, abs=1e-15)


def test_randomized_p_is_the_plans_formula():
    """(1 + #{rho_perm <= rho}) / (1 + resamples): scipy counts the observed value once (plan.yaml,
    analysis.p_values.spearman_tests)."""
    x, y = _tied(60, 0.3, 5)
    result = _scipy_reference(x, y.astype(float), "less", 499, 7)
    observed = sps.spearmanr(x, y).statistic
    count = int(np.sum(result.null_distribution <= observed + 1e-12))
    assert stats.spearman_permutation_p(x, y, "less", 499, 7) == (1 + count) / (1 + 499)


def test_seeded_and_undefined_on_a_constant_vector():
    x, y = _tied(50, 0.4, 3)
    assert stats.spearman_permutation_p(x, y, "less", 199, 1) == stats.spearman_permutation_p(x, y, "less", 199, 1)
    assert math.isnan(stats.spearman_permutation_p(np.ones(10), y[:10], "less", 99, 1))
    assert math.isnan(stats.spearman_permutation_p(x[:10], np.ones(10), "less", 99, 1))


def _sparse(n, accuracy, seed):
    """Heavy ties: 80% of problems without a violation, the rest 1-3, independent of correctness."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < 0.8, 0, rng.integers(1, 4, n)).astype(float), rng.random(n) < accuracy


def test_size_under_the_null_with_ties_where_the_t_approximation_is_liberal():
    """n = 40, heavy ties, a lopsided label: scipy's t approximation rejects about 2.9% at 0.0125
    (issue 49 measured 3.15% in its setting), beyond 3 MC se of the level; the permutation test
    stays within them."""
    alpha, datasets = 0.0125, 1000
    cells = [_sparse(40, 0.9, 1000 + i) for i in range(datasets)]
    permutation = np.array([stats.spearman_permutation_p(x, y, "less", 399, i) for i, (x, y) in enumerate(cells)])
    t_approximation = np.array([stats.spearman_p(x, y, "less") for x, y in cells])
    defined = np.isfinite(permutation)
    bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / defined.sum())
    assert np.mean(permutation[defined] <= alpha) <= bound
    assert np.mean(t_approximation[defined] <= alpha) > bound  # the check can fail: the old p-value fails it


@pytest.mark.parametrize("n, seed", [(40, 1), (300, 2)])
def test_the_p_value_does_not_depend_on_how_many_permutations_are_held_at_once(monkeypatch, n, seed):
    """The permutations are drawn in batches of stats.PERMUTATION_BATCH (memory: the audit's target),
    and the p-value is the same bits for every batch size, all 9,999 at once included."""
    x, correct = _tied(n, 0.6, seed)
    found = set()
    for batch in (9999, 1000, 250, 7):
        monkeypatch.setattr(stats, "PERMUTATION_BATCH", batch)
        found.add(stats.spearman_permutation_p(x, correct.astype(float), "greater", 9999, seed))
    assert len(found) == 1, found
