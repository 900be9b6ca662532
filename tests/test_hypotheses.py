"""The registered analysis (cotdyn.analysis.hypotheses) against scipy/sklearn, planted truths and the plan."""

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from cotdyn import stats
from cotdyn.analysis import hypotheses as hyp
from cotdyn.analysis.calibration import PlantedCell, paper_panel, simulate_labels, simulate_panel, simulate_records
from cotdyn.plan.load import load_plan, plan_sha256

PLAN_PATH = Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml"


@pytest.fixture(scope="module")
def plan():
    return load_plan(PLAN_PATH)


@pytest.fixture(scope="module")
def panel_records():
    return simulate_panel(paper_panel(scale=0.3), seed=7)


@pytest.fixture(scope="module")
def result(panel_records, plan):
    return hyp.analyze(panel_records, plan, plan_sha256(PLAN_PATH))


def _used(records, cell):
    rows = records[(records["cell"] == cell) & ~records["excluded"]]
    return rows.reset_index(drop=True)


def test_result_has_the_design_structure(result, plan):
    assert result["plan_sha256"] == plan_sha256(PLAN_PATH)
    assert list(result["cells"])[:8] == hyp.panel_cells(plan)
    for block in result["cells"].values():
        assert {"gap_pp", "ci", "odds_ratio", "p_fisher", "n", "n_excluded", "coverage", "accuracy"} <= set(block["H1"])
        assert {"rho", "ci", "buckets"} <= set(block["H3"]) and {"rho", "ci"} <= set(block["H2"])
        assert {"baseline_coverage", "reduction_pp", "ci"} <= set(block["H5"])
    assert set(result["H4"]) == {"gsm8k", "math500"}
    for entry in result["H4"].values():
        assert {"gap_pp", "ci", "difference_pp", "difference_ci", "estimable"} <= set(entry)
    assert [(m["id"], m["cell"]) for m in result["holm"]] == [(m["id"], m["cell"]) for m in plan["holm"]["family"]]
    assert set(result["verdicts"]) == {h["id"] for h in plan["hypotheses"]}
    assert {"H1", "H1-replication", "H2", "H3", "H4", "H5"} == set(result["verdicts"])
    assert all(v["verdict"] in hyp.VERDICTS for k, v in result["verdicts"].items() if k != "H4")
    assert result["verdicts"]["H4"]["verdict"] in hyp.ESTIMATION_VERDICTS


def test_tables_count_records_one_way_and_fill_the_h2_criterion(result, panel_records, plan):
    tables = hyp.table_rows(result)
    for row in tables["panel_table"]:
        cell = panel_records[panel_records["cell"] == row["cell"]]
        assert row["n"] == len(cell) and row["n_analyzed"] == int((~cell["excluded"]).sum())
    h2_cells = next(h["cells"] for h in plan["hypotheses"] if h["id"] == "H2")
    for row in tables["h2_table"]:
        expected = (
            result["verdicts"]["H2"]["cells"][row["cell"]]["verdict"] if row["cell"] in h2_cells else "not an H2 cell"
        )
        assert row["criterion"] == expected


def test_h1_point_estimates_equal_scipy(result, panel_records):
    for cell in ("qwen7b-gsm8k", "mistral7b-math500"):
        rows = _used(panel_records, cell)
        h1 = result["cells"][cell]["H1"]
        mono, correct = rows["monotone"].to_numpy(bool), rows["correct"].to_numpy(bool)
        assert h1["n"] == len(rows)
        assert h1["n_excluded"] == int(panel_records.loc[panel_records["cell"] == cell, "excluded"].sum())
        assert h1["gap_pp"] == pytest.approx(100 * (correct[mono].mean() - correct[~mono].mean()))
        table = [[(mono & correct).sum(), (mono & ~correct).sum()], [(~mono & correct).sum(), (~mono & ~correct).sum()]]
        fisher = sps.fisher_exact(table, alternative="greater")
        assert h1["odds_ratio"] == pytest.approx(fisher.statistic)
        assert h1["p_fisher"] == pytest.approx(fisher.pvalue)
        assert h1["coverage"] == pytest.approx(mono.mean()) and h1["accuracy"] == pytest.approx(correct.mean())
        assert h1["ci"][0] < h1["gap_pp"] < h1["ci"][1]
        assert h1["ci_n_kept"] == h1["ci_resamples"] == 1000


def test_h2_h3_point_estimates_equal_scipy_and_buckets_equal_groupby(result, panel_records):
    cell = "llama31-8b-math500"
    rows = _used(panel_records, cell)
    h2, h3 = result["cells"][cell]["H2"], result["cells"][cell]["H3"]
    assert h2["rho"] == pytest.approx(sps.spearmanr(rows["coherence"], rows["correct"]).statistic)
    assert h2["p_spearman"] == pytest.approx(sps.spearmanr(rows["coherence"], rows["correct"]).pvalue)
    ref = sps.spearmanr(rows["violations"], rows["correct"], alternative="less")
    # plan v4: H3's p is the permutation test of rho (analysis.p_values.spearman_tests), scipy's own
    test = sps.permutation_test(
        (rows["violations"].to_numpy(float),),
        lambda x: sps.spearmanr(x, rows["correct"]).statistic,
        permutation_type="pairings", n_resamples=9999, alternative="less",
        rng=np.random.default_rng(stats.derive_seed(20260829, cell, "H3 permutation")),
    )  # fmt: skip
    assert h3["rho"] == pytest.approx(ref.statistic) and h3["p_spearman"] == test.pvalue
    buckets = rows.groupby(rows["violations"].clip(upper=3))["correct"].agg(["size", "mean"])
    for entry, (_, expected) in zip(h3["buckets"], buckets.iterrows()):
        assert entry["n"] == expected["size"] and entry["accuracy"] == pytest.approx(expected["mean"])
    assert [b["bucket"] for b in h3["buckets"]] == ["0", "1", "2", ">=3"]


def test_h2_is_reported_beside_the_shape_effect_against_scipy_and_sklearn(result, panel_records, plan):
    """Seed 003 section 3.4's second H2 clause, descriptive: rho of the shape flag and the
    difference of absolute rhos, each against scipy (and the phi coefficient) on the planted panel."""
    from sklearn.metrics import matthews_corrcoef

    cell = "llama31-8b-gsm8k"
    rows = _used(panel_records, cell)
    h2 = result["cells"][cell]["H2"]
    block = h2["against_shape"]
    mono, y, c = rows["monotone"].to_numpy(bool), rows["correct"].to_numpy(bool), rows["coherence"].to_numpy(float)
    shape = sps.spearmanr(mono, y).statistic
    assert block["rho_shape"] == pytest.approx(shape) and shape == pytest.approx(matthews_corrcoef(y, mono))
    assert block["abs_difference"] == pytest.approx(abs(shape) - abs(sps.spearmanr(c, y).statistic))
    s = plan["analysis"]["bootstrap"]
    idx = stats.cell_resamples(s["seed"], cell, len(rows), s["resamples"])
    diff = [abs(sps.spearmanr(mono[r], y[r]).statistic) - abs(sps.spearmanr(c[r], y[r]).statistic) for r in idx[:200]]
    ours = np.abs(stats.spearman_binary_rows(mono.astype(float), y, idx[:200])) - np.abs(
        stats.spearman_binary_rows(c, y, idx[:200])
    )
    np.testing.assert_allclose(ours, diff, atol=1e-12)
    full = np.abs(stats.spearman_binary_rows(mono.astype(float), y, idx)) - np.abs(
        stats.spearman_binary_rows(c, y, idx)
    )
    assert block["abs_difference_ci"] == pytest.approx(list(np.quantile(full[np.isfinite(full)], [0.025, 0.975])))
    assert block["abs_difference_ci"][0] < block["abs_difference"] < block["abs_difference_ci"][1]
    row = next(r for r in hyp.table_rows(result)["h2_table"] if r["cell"] == cell)
    assert row["shape_rho"] == block["rho_shape"] and row["abs_difference_ci_lo"] == block["abs_difference_ci"][0]
    # descriptive only: the registered H2 verdict reads the CI clause alone
    assert "against_shape" not in json.dumps(result["verdicts"]["H2"])


def test_h5_matches_an_independent_sklearn_fit_and_matched_coverage(result, panel_records, plan):
    cell = "qwen7b-gsm8k"
    rows = _used(panel_records, cell)
    h5_plan = plan["analysis"]["h5"]
    x = rows[h5_plan["features"]].to_numpy(float)
    y = rows["correct"].to_numpy(bool)
    x_tr, x_te, y_tr, y_te, _, m_te = train_test_split(
        x,
        y,
        rows["monotone"].to_numpy(bool),
        train_size=h5_plan["train_fraction"],
        stratify=y,
        random_state=h5_plan["split_seed"],
    )
    model = LogisticRegression(max_iter=1000).fit(x_tr, y_tr)
    h5 = result["cells"][cell]["H5"]
    np.testing.assert_allclose(h5["model"]["coefficients"], model.coef_[0])
    assert h5["n_test"] == len(y_te) and h5["k"] == round(m_te.mean() * len(y_te)) == m_te.sum()
    assert h5["fp_baseline"] == pytest.approx(1 - y_te[m_te].mean())
    # Exact coverage: strict tiers accepted whole, the cut tier at its expected accuracy.
    frame = pd.DataFrame({"p": model.predict_proba(x_te)[:, 1].round(12), "y": y_te})
    tiers = frame.groupby("p", sort=True)["y"].agg(["size", "sum"]).iloc[::-1]
    left, correct = h5["k"], 0.0
    for size, n_correct in tiers.itertuples(index=False):
        take = min(size, left)
        correct += take * n_correct / size
        left -= take
    expected_fp = 1 - correct / h5["k"]
    assert h5["fp_filter"] == pytest.approx(expected_fp, abs=0.01)  # 100 draws around the expectation
    assert h5["reduction_pp"] == pytest.approx(100 * (h5["fp_baseline"] - h5["fp_filter"]))
    # As run: everything at or above the quantile threshold, overshooting the baseline coverage.
    p = model.predict_proba(x_te)[:, 1]
    accepted = p >= np.quantile(p, 1 - h5["baseline_coverage"])
    assert h5["as_run"]["coverage"] == pytest.approx(accepted.mean())
    assert h5["as_run"]["coverage_overshoot"] == pytest.approx(accepted.mean() - h5["baseline_coverage"])
    assert h5["as_run"]["coverage_overshoot"] >= 0


def test_h4_difference_combines_independent_per_cell_bootstraps(plan):
    truths = {f"{m}-gsm8k": PlantedCell(300, 0.5, 0.8, 0.6) for m in ("qwen7b", "mistral7b", "llama31-8b")}
    truths["r1-distill-7b-gsm8k"] = PlantedCell(300, 0.4, 0.7, 0.3)
    records = simulate_panel(truths, seed=3)
    result = hyp.analyze(records, plan, "x")
    h4 = result["H4"]["gsm8k"]
    gaps = {c: result["cells"][c]["H1"]["gap_pp"] for c in truths}
    standard = ["qwen7b-gsm8k", "mistral7b-gsm8k", "llama31-8b-gsm8k"]
    assert h4["estimable"] is True and h4["reason"] is None
    assert h4["gap_pp"] == gaps["r1-distill-7b-gsm8k"]
    assert h4["difference_pp"] == pytest.approx(gaps["r1-distill-7b-gsm8k"] - np.mean([gaps[c] for c in standard]))
    boot = plan["analysis"]["bootstrap"]

    def gap_rows(cell):
        rows = _used(records, cell)
        idx = stats.resample_indices(len(rows), boot["resamples"], stats.derive_seed(boot["seed"], cell))
        return 100 * stats.accuracy_gap_rows(rows["monotone"].to_numpy(bool), rows["correct"].to_numpy(bool), idx)

    diff = gap_rows("r1-distill-7b-gsm8k") - np.mean([gap_rows(c) for c in standard], axis=0)
    interval = stats.percentile_interval(diff, boot["level"])
    assert h4["difference_ci"] == pytest.approx([interval.lo, interval.hi])
    # The math500 cells are absent: H4 there is labelled, not computed.
    assert result["H4"]["math500"]["estimable"] is False
    assert "missing" in result["H4"]["math500"]["reason"] and result["H4"]["math500"]["difference_pp"] is None


def test_h4_not_estimable_names_the_small_group(result):
    h4 = result["H4"]["math500"]  # planted distilled coverage 0.6% of 150 problems
    n_mono = h4["group_sizes"]["r1-distill-7b-math500"]["monotone"]
    assert n_mono < 10 and h4["estimable"] is False
    assert f"r1-distill-7b-math500 has {n_mono} monotone chains (< min_group_size 10)" in h4["reason"]
    assert result["verdicts"]["H4"]["verdict"] == "not_estimable"


def _degenerate_records():
    base = simulate_records(PlantedCell(60, 0.5, 0.7, 0.4), "qwen7b-gsm8k", seed=1)
    no_mono = simulate_records(PlantedCell(60, 0.0, 0.7, 0.4), "qwen7b-math500", seed=1)
    constant = simulate_records(PlantedCell(60, 0.5, 1.0, 1.0), "mistral7b-gsm8k", seed=1)
    tiny = simulate_records(PlantedCell(3, 0.5, 0.7, 0.4), "llama31-8b-gsm8k", seed=1)
    all_out = simulate_records(PlantedCell(5, 0.5, 0.7, 0.4, exclusion_rate=1.0), "llama31-8b-math500", seed=1)
    return pd.concat([base, no_mono, constant, tiny, all_out], ignore_index=True)


def test_degenerate_cells_give_labelled_nulls_not_numbers(plan):
    result = hyp.analyze(_degenerate_records(), plan, "x")
    cells = result["cells"]
    h1 = cells["qwen7b-math500"]["H1"]
    assert h1["gap_pp"] is None and h1["accuracy_monotone"] is None and h1["p_fisher"] is None
    assert h1["ci"] == [None, None] and "no monotone chains" in h1["reason"]
    assert "no monotone chain in the test split" in cells["qwen7b-math500"]["H5"]["reason"]
    assert {"bucket": "0", "n": 0, "accuracy": None}.items() <= cells["qwen7b-math500"]["H3"]["buckets"][0].items()

    constant = cells["mistral7b-gsm8k"]
    assert constant["H2"]["rho"] is None and "correct is constant" in constant["H2"]["reason"]
    assert constant["H3"]["rho"] is None and constant["H5"]["reduction_pp"] is None
    assert "stratified split" in constant["H5"]["reason"]

    tiny = cells["llama31-8b-gsm8k"]["H1"]
    assert tiny["n"] == 3 and tiny["ci_resamples"] == 1000
    assert tiny["gap_pp"] is None or tiny["ci_n_kept"] < 1000  # most 3-problem resamples lose a group

    gone = cells["llama31-8b-math500"]["H1"]
    assert gone["n"] == 0 and gone["n_excluded"] == 5 and gone["gap_pp"] is None and gone["coverage"] is None

    missing = cells["r1-distill-7b-gsm8k"]
    assert missing["summary"]["status"] == "missing"
    assert missing["H1"]["n"] is None and missing["H1"]["reason"] == hyp.MISSING_CELL
    assert result["H4"]["gsm8k"]["estimable"] is False and "r1-distill-7b-gsm8k" in result["H4"]["gsm8k"]["reason"]
    assert result["verdicts"]["H1"]["cells"]["qwen7b-math500"]["verdict"] == "not_estimable"
    holm = {(m["id"], m["cell"]): m for m in result["holm"]}
    # An undefined member enters Holm as the plan's holm.undefined_p (1) and is not rejected.
    undefined = holm[("H1", "qwen7b-math500")]
    assert undefined["p"] is None and undefined["p_entered"] == plan["holm"]["undefined_p"] == 1.0
    assert undefined["reject"] is False and undefined["p_adjusted"] is None
    # JSON has no NaN anywhere: every undefined value is null.
    json.dumps(hyp.json_ready(result), allow_nan=False)


@pytest.mark.parametrize(
    "criterion, ci, verdict",
    [
        ({"kind": "ci_lower_above", "value": 0.0}, [0.1, 5.0], "supported"),
        ({"kind": "ci_lower_above", "value": 0.0}, [0.0, 5.0], "not_supported"),
        ({"kind": "ci_upper_below", "value": 0.0}, [-0.3, -0.01], "supported"),
        ({"kind": "ci_upper_below", "value": 0.0}, [-0.3, 0.02], "not_supported"),
        ({"kind": "ci_inside", "low": -0.1, "high": 0.1}, [-0.07, 0.04], "supported"),
        ({"kind": "ci_inside", "low": -0.1, "high": 0.1}, [-0.07, 0.10], "not_supported"),
        ({"kind": "ci_inside", "low": -0.1, "high": 0.1}, [None, None], "not_estimable"),
    ],
)
def test_cell_verdict_per_criterion_kind(criterion, ci, verdict):
    assert hyp.cell_verdict(criterion, ci) == verdict


def test_combine_verdicts_and_unknown_kinds():
    assert hyp.combine_verdicts(["supported", "supported"]) == "supported"
    assert hyp.combine_verdicts(["supported", "not_estimable"]) == "not_estimable"
    assert hyp.combine_verdicts(["not_estimable", "not_supported"]) == "not_supported"
    assert hyp.combine_verdicts([]) == "not_estimable"
    with pytest.raises(ValueError, match="unknown criterion kind 'ci_wide'"):
        hyp.cell_verdict({"kind": "ci_wide"}, [0.0, 1.0])


def test_verdicts_are_computed_from_the_plan_criteria(result, plan, panel_records):
    for hid in ("H1", "H2", "H3", "H5"):
        entry = result["verdicts"][hid]
        criterion = next(h for h in plan["hypotheses"] if h["id"] == hid)["criterion"]
        expected = hyp.combine_verdicts(hyp.cell_verdict(criterion, c["ci"]) for c in entry["cells"].values())
        assert entry["verdict"] == expected and entry["criterion"] == criterion
    # Moving a threshold in the plan moves the verdict: nothing is typed by hand.
    strict = copy.deepcopy(plan)
    for h in strict["hypotheses"]:
        if h["id"] == "H1":
            h["criterion"]["value"] = 1000.0
        if h["id"] == "H2":
            h["criterion"].update(low=-1.0, high=1.0)
    changed = hyp.analyze(panel_records, strict, "x")["verdicts"]
    assert changed["H1"]["verdict"] == "not_supported"
    assert changed["H2"]["verdict"] == "supported"
    bad = copy.deepcopy(plan)
    bad["hypotheses"][0]["statistic"] = "median_gap"
    with pytest.raises(ValueError, match="unknown statistic 'median_gap'"):
        hyp.analyze(panel_records.head(5), bad, "x")


def test_holm_uses_the_plan_family(result):
    p = [m["p"] for m in result["holm"]]
    reject, adjusted = stats.holm(p, alpha=0.05)
    assert [m["p_adjusted"] for m in result["holm"]] == pytest.approx(list(adjusted))
    assert [m["reject"] for m in result["holm"]] == list(reject)
    assert result["holm"][0]["p"] == result["cells"]["qwen7b-gsm8k"]["H1"]["p_fisher"]
    assert result["holm"][2]["p"] == result["cells"]["qwen7b-gsm8k"]["H3"]["p_spearman"]


def test_outputs_are_byte_identical_when_run_twice(tmp_path, panel_records, plan):
    written = []
    for run in ("a", "b"):
        res = hyp.analyze(panel_records, plan, "sha")
        written.append(hyp.write_analysis(res, panel_records, tmp_path / run))
    names = sorted(p.name for p in written[0])
    assert names == sorted(
        ["hypotheses.json", "panel_table.csv", "h2_table.csv", "h3_buckets.csv", "h4_table.csv",
         "h5_table.csv", "holm_table.csv", "forest_gaps.png", "verdicts_table.csv"]
    )  # fmt: skip
    for a, b in zip(written[0], written[1]):
        assert a.read_bytes() == b.read_bytes(), a.name
    panel = pd.read_csv(tmp_path / "a" / "panel_table.csv")
    assert list(panel["cell"])[:8] == hyp.panel_cells(plan)
    loaded = json.loads((tmp_path / "a" / "hypotheses.json").read_text())
    assert loaded["verdicts"]["H1"]["verdict"] in hyp.VERDICTS
    with pytest.raises(ValueError, match="does not match the records"):
        hyp.write_analysis(res, panel_records.iloc[5:], tmp_path / "c")


def test_read_records_names_the_file_and_missing_column(tmp_path):
    records = simulate_records(PlantedCell(20, 0.5, 0.7, 0.4), "qwen7b-gsm8k", seed=1)
    good = tmp_path / "good.parquet"
    records.to_parquet(good)
    bad = tmp_path / "bad.parquet"
    records.drop(columns=["violations"]).to_parquet(bad)
    assert len(hyp.read_records([good, good])) == 40
    with pytest.raises(ValueError, match=r"bad\.parquet: missing column\(s\) violations"):
        hyp.read_records([good, bad])
    with pytest.raises(ValueError, match="duplicated"):
        hyp.analyze(hyp.read_records([good, good]), load_plan(PLAN_PATH), "x")


def test_missing_values_in_used_rows_are_named(plan):
    records = simulate_records(PlantedCell(30, 0.5, 0.7, 0.4), "qwen7b-gsm8k", seed=2)
    records.loc[3, "coherence"] = np.nan
    with pytest.raises(ValueError, match="cell qwen7b-gsm8k: column 'coherence' has 1 missing"):
        hyp.analyze(records, plan, "x")


def test_planted_gap_is_covered_and_the_null_rarely_rejected():
    """A fast planted-truth check; scripts/calibrate_analysis.py runs the full-size version."""
    rng = np.random.default_rng(20260829)
    truth = PlantedCell(400, 0.5, 0.8, 0.7)
    covered, estimates, null_rejections = 0, [], 0
    for i in range(80):
        labels = simulate_labels(truth, rng)
        idx = stats.resample_indices(truth.n, 400, seed=i)
        gaps = 100 * stats.accuracy_gap_rows(labels.monotone, labels.correct, idx)
        interval = stats.percentile_interval(gaps, 0.95)
        covered += interval.lo <= truth.gap_pp <= interval.hi
        estimates.append(100 * stats.accuracy_gap(labels.monotone, labels.correct))
        null = simulate_labels(PlantedCell.null(400, 0.5, 0.7), rng)
        null_rejections += stats.fisher_test(null.monotone, null.correct, "greater")[1] < 0.05
    assert covered >= 68  # 95% nominal: P(fewer than 68 of 80) < 1e-3
    se = np.std(estimates) / np.sqrt(len(estimates))
    assert abs(np.mean(estimates) - truth.gap_pp) < 4 * se
    assert null_rejections <= 10  # nominal 4 of 80; Fisher is conservative


def test_simulated_records_agree_with_their_planted_truth():
    truth = PlantedCell(3000, 0.4, 0.85, 0.55, exclusion_rate=0.05)
    records = simulate_records(truth, "qwen7b-gsm8k", seed=5)
    assert set(hyp.RECORD_COLUMNS) <= set(records.columns)  # records may carry more (reference.md section 11)
    used = records[~records["excluded"]]
    rises = [sum(b - a > 0.01 for a, b in zip(t, t[1:])) for t in used["trajectory"]]
    assert rises == list(used["violations"]) and ((used["violations"] == 0) == used["monotone"]).all()
    assert (used["n_points"] == used["trajectory"].map(len)).all() and (used["n_points"] >= 2).all()
    np.testing.assert_allclose(used["coherence"], used["trajectory"].map(lambda t: t[0] - t[-1]))
    assert (records.loc[records["excluded"], "n_points"] < 2).all()
    assert records["excluded"].mean() == pytest.approx(0.05, abs=0.015)
    assert used["monotone"].mean() == pytest.approx(0.4, abs=0.03)
    gap = 100 * stats.accuracy_gap(used["monotone"].to_numpy(bool), used["correct"].to_numpy(bool))
    assert gap == pytest.approx(truth.gap_pp, abs=5.0)
    assert PlantedCell.from_summary(1000, 0.5, 0.7, 20.0).gap_pp == pytest.approx(20.0)
