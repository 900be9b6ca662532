"""cotdyn.stats against independent computations (scipy, statsmodels, plain loops)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from cotdyn import stats


def test_resample_indices_come_from_default_rng_and_are_seeded():
    idx = stats.resample_indices(7, 50, seed=11)
    assert idx.shape == (50, 7)
    np.testing.assert_array_equal(idx, np.random.default_rng(11).integers(0, 7, size=(50, 7)))
    assert not np.array_equal(idx, stats.resample_indices(7, 50, seed=12))
    with pytest.raises(ValueError, match="empty"):
        stats.resample_indices(0, 10, seed=1)


def test_derive_seed_is_stable_and_separates_streams():
    assert stats.derive_seed(5, "qwen7b-gsm8k") == stats.derive_seed(5, "qwen7b-gsm8k")
    assert stats.derive_seed(5, "qwen7b-gsm8k") != stats.derive_seed(5, "qwen7b-math500")
    assert stats.derive_seed(5, "a") != stats.derive_seed(6, "a")


def test_percentile_interval_drops_nan_and_reports_kept():
    values = np.array([np.nan, 1.0, 2.0, np.nan, 3.0, 4.0, 5.0])
    interval = stats.percentile_interval(values, level=0.9)
    lo, hi = np.quantile([1.0, 2.0, 3.0, 4.0, 5.0], [0.05, 0.95])
    assert (interval.lo, interval.hi) == (pytest.approx(lo), pytest.approx(hi))
    assert (interval.n_kept, interval.n_resamples) == (5, 7)
    empty = stats.percentile_interval(np.full(4, np.nan), level=0.95)
    assert (empty.lo, empty.hi, empty.n_kept, empty.n_resamples) == (None, None, 0, 4)


def test_category_counts_equal_a_per_row_bincount():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, 30)
    idx = stats.resample_indices(30, 50, seed=1)
    counts = stats.category_counts(codes, idx, 5)
    for row, got in zip(idx, counts):
        np.testing.assert_array_equal(got, np.bincount(codes[row], minlength=5))


def test_accuracy_gap_rows_matches_a_groupby_loop_and_marks_empty_groups():
    rng = np.random.default_rng(0)
    flag = rng.random(40) < 0.3
    correct = rng.random(40) < 0.6
    idx = stats.resample_indices(40, 200, seed=3)
    gaps = stats.accuracy_gap_rows(flag, correct, idx)
    for row, gap in zip(idx, gaps):
        frame = pd.DataFrame({"flag": flag[row], "correct": correct[row]})
        by_group = frame.groupby("flag")["correct"].mean()
        expected = by_group.get(True, np.nan) - by_group.get(False, np.nan)
        np.testing.assert_allclose(gap, expected)
    assert stats.accuracy_gap(flag, correct) == pytest.approx(correct[flag].mean() - correct[~flag].mean())
    # A resample with no flagged item has no gap: NaN, to be dropped, never 0.
    one_row = stats.full_sample(5)
    assert np.isnan(stats.accuracy_gap_rows(np.zeros(5, bool), np.ones(5, bool), one_row)[0])
    assert np.isnan(stats.accuracy_gap_rows(np.ones(5, bool), np.ones(5, bool), one_row)[0])
    acc_in, acc_out = stats.group_accuracy_rows(np.zeros(5, bool), np.ones(5, bool), one_row)
    assert np.isnan(acc_in[0]) and acc_out[0] == 1.0


def test_spearman_binary_rows_equal_scipy_spearmanr_per_row():
    rng = np.random.default_rng(2)
    for x in (rng.integers(0, 6, 30).astype(float), rng.normal(size=30)):  # ties as violation counts have
        y = rng.random(30) < 0.5
        idx = stats.resample_indices(30, 300, seed=4)
        idx = np.vstack([idx, np.full(30, 3), np.flatnonzero(y)[np.arange(30) % y.sum()]])  # constant x; constant y
        rho = stats.spearman_binary_rows(x, y, idx)
        assert np.isnan(rho[-2:]).all()
        for row, value in zip(idx, rho):
            if x[row].min() == x[row].max() or y[row].min() == y[row].max():
                assert np.isnan(value)
            else:
                assert value == pytest.approx(sps.spearmanr(x[row], y[row]).statistic, abs=1e-12)
        assert stats.spearman_binary(x, y) == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_of_a_constant_vector_is_nan():
    assert np.isnan(stats.spearman_binary(np.ones(10), np.arange(10) % 2 == 0))
    assert np.isnan(stats.spearman_binary(np.arange(10.0), np.ones(10, bool)))
    assert np.isnan(stats.spearman_p(np.ones(10), np.arange(10) % 2 == 0, "less"))


def test_spearman_p_is_scipys_with_the_alternative():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, 80)
    y = rng.random(80) < 0.5
    for alternative in ("less", "two-sided"):
        expected = sps.spearmanr(x, y, alternative=alternative).pvalue
        assert stats.spearman_p(x, y, alternative) == pytest.approx(expected)


def test_fisher_test_greater_odds_ratio_and_p_by_hand():
    flag = np.array([1] * 30 + [0] * 50, dtype=bool)
    correct = np.array([1] * 24 + [0] * 6 + [1] * 30 + [0] * 20, dtype=bool)
    np.testing.assert_array_equal(stats.contingency_2x2(flag, correct), [[24, 6], [30, 20]])
    odds_ratio, p = stats.fisher_test(flag, correct, "greater")
    assert odds_ratio == pytest.approx(24 * 20 / (6 * 30))
    # One-sided p: P(X >= 24) for X ~ hypergeometric(80 problems, 54 correct, 30 flagged).
    assert p == pytest.approx(sps.hypergeom.sf(23, 80, 54, 30))
    assert p == pytest.approx(sps.fisher_exact([[24, 6], [30, 20]], alternative="greater").pvalue)


def test_holm_is_the_step_down_procedure():
    p = [0.01, 0.04, 0.03, 0.005]
    reject, adjusted = stats.holm(p, alpha=0.05)
    # By hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 with a running maximum.
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_array_equal(reject, [True, False, False, True])
    ref_reject, ref_adjusted, _, _ = multipletests(p, alpha=0.05, method="holm")
    np.testing.assert_allclose(adjusted, ref_adjusted)
    np.testing.assert_array_equal(reject, ref_reject)
    with pytest.raises(ValueError, match="finite"):
        stats.holm([0.01, np.nan], alpha=0.05)


def statsmodels_holm(p: list[float], alpha: float):
    """statsmodels' Holm with this process's objects frozen (gc.freeze): its gc.collect() then walks only
    what the call made, not a test worker's whole heap (0.6 s a call beside the other workers)."""
    import gc

    gc.freeze()
    try:
        reject, adjusted, _, _ = multipletests(np.asarray(p, dtype=float), alpha=alpha, method="holm")
    finally:
        gc.unfreeze()
    return reject, adjusted


@settings(max_examples=200, deadline=None)
@given(
    p=st.lists(st.sampled_from([0.0, 0.001, 0.0125, 0.025, 0.05, 0.5, 1.0]) | st.floats(0, 1), max_size=12),
    alpha=st.sampled_from([0.01, 0.05, 0.1]) | st.floats(0.001, 0.5),
)
def test_holm_equals_statsmodels_bit_for_bit(p, alpha):
    reject, adjusted = stats.holm(p, alpha)
    ref_reject, ref_adjusted = statsmodels_holm(p, alpha)
    assert reject.tolist() == ref_reject.tolist()
    assert adjusted.tobytes() == np.asarray(ref_adjusted, dtype=float).tobytes()


def test_holm_starts_no_garbage_collection():
    """statsmodels' Holm collects garbage on every call (0.2 s in a process holding a model)."""
    import gc

    started = []
    record = lambda phase, info: started.append(info["generation"]) if phase == "start" else None  # noqa: E731
    gc.disable()  # no automatic collection either: what starts one here is a gc.collect() call
    gc.callbacks.append(record)
    try:
        reject, _ = stats.holm([0.01, 0.2, 0.03], alpha=0.05)
    finally:
        gc.callbacks.remove(record)
        gc.enable()
    assert started == [] and reject.tolist() == [True, False, False]


def test_descending_tiers_share_a_tier_on_ties():
    np.testing.assert_array_equal(stats.descending_tiers([0.2, 0.9, 0.2, 0.5]), [2, 0, 2, 1])


def test_accept_top_k_accepts_exactly_k_and_breaks_ties_uniformly():
    tiers = np.array([0, 1, 1, 1, 1, 2, 2, 0])  # two above the cut, four tied at it, two below
    accepted = stats.accept_top_k(tiers, k=4, draws=4000, seed=9)
    assert (accepted.sum(axis=1) == 4).all()
    assert accepted[:, tiers == 0].all() and not accepted[:, tiers == 2].any()
    # The two remaining places fall uniformly on the four tied items: each is accepted half the time.
    np.testing.assert_allclose(accepted[:, tiers == 1].mean(axis=0), 0.5, atol=0.03)
    np.testing.assert_array_equal(accepted, stats.accept_top_k(tiers, k=4, draws=4000, seed=9))
    with pytest.raises(ValueError, match="k must lie"):
        stats.accept_top_k(tiers, k=0, draws=3, seed=1)


def _expected_accuracy_by_loop(tiers, correct, row, k):
    order = np.argsort(tiers[row], kind="stable")
    t = tiers[row][order]
    c = correct[row][order].astype(float)
    cut = t[k - 1]
    above = c[t < cut].sum()
    block = c[t == cut]
    return (above + (k - (t < cut).sum()) * block.mean()) / k


def test_exact_coverage_rows_match_a_loop_and_the_draw_average():
    rng = np.random.default_rng(5)
    tiers = rng.integers(0, 5, 40)
    flag = rng.random(40) < 0.4
    correct = rng.random(40) < 0.5
    idx = stats.resample_indices(40, 60, seed=6)
    acc_flag, acc_top_k = stats.exact_coverage_rows(tiers, flag, correct, idx)
    for b in range(60):
        row = idx[b]
        k = flag[row].sum()
        assert acc_flag[b] == pytest.approx(correct[row][flag[row]].mean())
        assert acc_top_k[b] == pytest.approx(_expected_accuracy_by_loop(tiers, correct, row, k))
    no_flag = stats.exact_coverage_rows(tiers, np.zeros(40, bool), correct, idx[:1])
    assert np.isnan(no_flag[0][0]) and np.isnan(no_flag[1][0])
    _, exact = stats.exact_coverage_rows(tiers, flag, correct, stats.full_sample(40))
    draws = stats.accuracy_at_k_draws(tiers, correct, int(flag.sum()), draws=2000, seed=1)
    assert draws == pytest.approx(exact[0], abs=0.01)


def test_stratified_split_resamples_draw_each_class_within_the_split_at_the_rows_share():
    rng = np.random.default_rng(5)
    n = 400
    stratum, member = rng.random(n) < 0.7, rng.random(n) < 0.4
    idx = stats.resample_indices(n, 3000, seed=9)
    split = stats.stratified_split_resamples(idx, member, stratum, seed=4)
    size = int(member.sum())
    assert split.shape == (3000, size) and member[split].all()
    # each row's stratum count is the cell row's stratum share at the split's size
    np.testing.assert_array_equal(stratum[split].sum(axis=1), np.rint(stratum[idx].mean(axis=1) * size))
    # so the share varies as the cell's does (sd sqrt(p(1-p)/n)), not as a sample of the split's size would
    share = stratum[split].mean(axis=1)
    p = stratum.mean()
    assert share.std() == pytest.approx(np.sqrt(p * (1 - p) / n), rel=0.1)
    assert share.std() < 0.8 * np.sqrt(p * (1 - p) / size)
    # within a class every member is drawn uniformly (chi-square against equal counts)
    for part in (member & stratum, member & ~stratum):
        counts = np.bincount(split.ravel(), minlength=n)[part]
        assert sps.chisquare(counts).pvalue > 0.001
    np.testing.assert_array_equal(split, stats.stratified_split_resamples(idx, member, stratum, seed=4))


def test_stratified_split_resamples_with_one_class_absent_from_the_split_draw_the_other():
    stratum = np.array([True, True, False, False, True, False])
    member = np.array([True, True, False, False, True, False])  # no member outside the stratum
    idx = stats.resample_indices(6, 50, seed=1)
    split = stats.stratified_split_resamples(idx, member, stratum, seed=2)
    assert split.shape == (50, 3) and member[split].all()
