"""Common random numbers: one problem-resample matrix per cell, read by every bootstrap of that cell
(stats.cell_resamples; seed 003 section 3.4, docs/reference.md section 5)."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from cotdyn import stats
from cotdyn.analysis import exploratory as ex
from cotdyn.analysis import hypotheses as hyp
from cotdyn.analysis.calibration import PlantedCell, simulate_records
from cotdyn.report.exploratory_tables import exploratory_tables

CELL = "qwen7b-gsm8k"


@pytest.fixture(scope="module")
def records():
    return simulate_records(PlantedCell(240, 0.5, 0.8, 0.6), CELL, seed=11)


@pytest.fixture(scope="module")
def boot(plan):
    return plan["analysis"]["bootstrap"]


@pytest.fixture(scope="module")
def result(records, plan):
    return hyp.analyze(records, plan, "x")


@pytest.fixture(scope="module")
def tables(records, boot):
    return exploratory_tables(records, m=5, epsilon=0.01, seed=boot["seed"], draws=5, resamples=boot["resamples"])


def test_cell_resamples_is_one_stream_per_cell():
    a = stats.cell_resamples(7, "qwen7b-gsm8k", 50, 20)
    np.testing.assert_array_equal(a, stats.cell_resamples(7, "qwen7b-gsm8k", 50, 20))
    np.testing.assert_array_equal(a, stats.resample_indices(50, 20, stats.derive_seed(7, "qwen7b-gsm8k")))
    assert not np.array_equal(a, stats.cell_resamples(7, "qwen7b-math500", 50, 20))
    assert not np.array_equal(a, stats.cell_resamples(8, "qwen7b-gsm8k", 50, 20))


def test_epsilon_zero_and_001_give_identical_flags_and_identical_cis_at_m5(tables):
    sweep = tables["epsilon_sweep"].set_index("epsilon")
    # At m = 5 the entropy grid's smallest step exceeds 0.01, so the two epsilons see the same flags ...
    assert sweep.loc[0.01, "n_changed_vs_min_epsilon"] == 0 and sweep.loc[0.01, "below_spacing"]
    # ... and, reading the same resample matrix, the same interval to the last bit.
    for column in ("coverage", "gap_pp", "ci_lo", "ci_hi", "ci_n_kept"):
        assert sweep.loc[0.0, column] == sweep.loc[0.01, column], column


def test_exploratory_gaps_are_paired_with_the_registered_h1(tables, result):
    h1 = result["cells"][CELL]["H1"]
    sweep = tables["epsilon_sweep"].set_index("epsilon")
    assert [sweep.loc[0.01, "ci_lo"], sweep.loc[0.01, "ci_hi"]] == h1["ci"]
    # Early exit at the longest trajectory's transition count is the whole trajectory: H1 again.
    early = tables["early_exit"]
    last = early.loc[early["transitions"].idxmax()]
    assert [last["ci_lo"], last["ci_hi"]] == h1["ci"]


def test_h5_resamples_the_test_split_as_it_was_drawn(records, result, plan, boot):
    rows = records[~records["excluded"]].reset_index(drop=True)
    h5_plan = plan["analysis"]["h5"]
    x = rows[h5_plan["features"]].to_numpy(float)
    y = rows["correct"].to_numpy(bool)
    mono = rows["monotone"].to_numpy(bool)
    x_tr, x_te, y_tr, y_te, _, test_rows = train_test_split(
        x, y, np.arange(len(rows)), train_size=h5_plan["train_fraction"], stratify=y, random_state=h5_plan["split_seed"]
    )
    p = LogisticRegression(max_iter=1000).fit(x_tr, y_tr).predict_proba(x_te)[:, 1]
    prob = dict(zip(test_rows, p))
    idx = stats.cell_resamples(boot["seed"], CELL, len(rows), boot["resamples"])
    member = np.isin(np.arange(len(rows)), test_rows)
    split = stats.stratified_split_resamples(idx, member, y, stats.derive_seed(boot["seed"], CELL, "H5 test split"))
    diffs = []
    for row, drawn in zip(idx, split):
        # the cell matrix's row sets the resample's correct share; each class is drawn from its test problems
        assert len(drawn) == len(test_rows) and set(drawn) <= set(test_rows)
        assert y[drawn].sum() == round(y[row].mean() * len(test_rows))
        flagged = [i for i in drawn if mono[i]]
        if not flagged:
            diffs.append(np.nan)
            continue
        k = len(flagged)
        by_p = sorted(drawn, key=lambda i: -prob[i])
        cut = prob[by_p[k - 1]]
        above = [i for i in drawn if prob[i] > cut]
        tied = [i for i in drawn if prob[i] == cut]
        expected = (sum(y[i] for i in above) + (k - len(above)) * np.mean([y[i] for i in tied])) / k
        diffs.append(100 * (expected - np.mean([y[i] for i in flagged])))
    lo, hi = np.quantile(np.array(diffs)[np.isfinite(diffs)], [0.025, 0.975])
    h5 = result["cells"][CELL]["H5"]
    assert h5["ci"] == pytest.approx([lo, hi], abs=1e-9)
    assert h5["ci_n_kept"] == int(np.isfinite(diffs).sum())


def test_exact_coverage_rows_count_only_member_draws():
    rng = np.random.default_rng(3)
    tiers, flag, correct = rng.integers(0, 4, 30), rng.random(30) < 0.5, rng.random(30) < 0.5
    member = rng.random(30) < 0.4
    idx = stats.resample_indices(30, 40, seed=2)
    acc_flag, acc_top_k = stats.exact_coverage_rows(tiers, flag, correct, idx, member)
    for b, row in enumerate(idx):
        kept = row[member[row]]
        k = int(flag[kept].sum())
        if k == 0:
            assert np.isnan(acc_flag[b]) and np.isnan(acc_top_k[b])
            continue
        assert acc_flag[b] == pytest.approx(correct[kept][flag[kept]].mean())
        order = kept[np.argsort(tiers[kept], kind="stable")]
        cut = tiers[order[k - 1]]
        above = order[tiers[order] < cut]
        tied = order[tiers[order] == cut]
        assert acc_top_k[b] == pytest.approx((correct[above].sum() + (k - above.size) * correct[tied].mean()) / k)


def test_early_exit_and_epsilon_sweep_without_a_matrix_give_no_interval():
    frame = simulate_records(PlantedCell(30, 0.5, 0.8, 0.6), CELL, seed=1)
    for row in ex.epsilon_sweep(frame, m=5, idx=None) + ex.early_exit(frame, 0.01, idx=None):
        assert row["ci_lo"] is None and row["ci_hi"] is None and row["ci_n_kept"] == 0
