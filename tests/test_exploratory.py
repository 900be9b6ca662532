"""Exploratory statistics (seed 003 sections 5-6, Appendix F) against independent computations,
hand-worked cases and planted truths; the writers for determinism."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from factories import records_frame
from scipy import stats as sps
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from statsmodels.duration.survfunc import SurvfuncRight

from cotdyn.analysis import exploratory as ex
from cotdyn.report import exploratory_tables as report
from cotdyn.report import figures
from cotdyn.report.header import report_header


def planted_records(n: int, seed: int, cell: str = "qwen7b-gsm8k") -> pd.DataFrame:
    """Records with trajectories on the m = 5 grid; correctness depends on final entropy and shape."""
    rng = np.random.default_rng(seed)
    grid = np.array([0.0, 0.500402, 0.673012, 0.950271, 1.05492, 1.332179, 1.609438])
    rows = []
    for i in range(n):
        length = int(rng.integers(2, 9))
        traj = np.sort(rng.choice(grid, length))[::-1].copy()
        if rng.random() < 0.4:  # plant a rise
            j = int(rng.integers(1, length))
            traj[j] = min(grid[-1], traj[j - 1] + grid[int(rng.integers(1, 4))])
        viol = int((np.diff(traj) > 0.01).sum())
        p = 1 / (1 + math.exp(-(0.8 - 1.2 * traj[-1] + 0.6 * (viol == 0))))
        correct = bool(rng.random() < p)
        own = correct if rng.random() < 0.85 else not correct
        truncated = bool(rng.random() < 0.2)
        rows.append({
            "trajectory": traj.tolist(), "pred": "1" if correct else "2", "correct": correct,
            "chain_answer": "1" if own else "3", "chain_correct": own,
            "reference_tokens": 600 if truncated else int(rng.integers(50, 600)), "reference_truncated": truncated,
        })  # fmt: skip
    return records_frame(cell=cell, **pd.DataFrame(rows).to_dict("list"))


# ---------------------------------------------------------------------------------------------
# ROC area


def test_roc_area_matches_sklearn_with_ties():
    rng = np.random.default_rng(1)
    y = rng.random(300) < 0.6
    for score in (rng.integers(0, 5, 300).astype(float), rng.random(300), (rng.random(300) < 0.5).astype(float)):
        assert ex.roc_area(score, y) == pytest.approx(roc_auc_score(y, score), abs=1e-12)


def test_roc_area_undefined_for_one_class():
    assert ex.roc_area(np.array([0.1, 0.2]), np.array([True, True])) is None


def test_signals_are_oriented_so_higher_means_correct():
    r = planted_records(400, 2)
    y = r["correct"].to_numpy()
    expect = {
        "monotone": r["monotone"].astype(float),
        "violations": -r["violations"].astype(float),
        "final_entropy": -r["final_entropy"],
        "coherence": r["coherence"],
    }
    rows = {row["signal"]: row for row in ex.ranking_table(r, draws=5, seed=0)}
    for name, score in expect.items():
        assert rows[name]["roc_auc"] == pytest.approx(roc_auc_score(y, score), abs=1e-12)


# ---------------------------------------------------------------------------------------------
# AURC (Appendix F.2)


def test_aurc_of_a_perfect_ranking_by_hand():
    y = np.array([1] * 6 + [0] * 4, dtype=bool)
    score = np.arange(10, 0, -1, dtype=float)  # correct chains ranked first
    full = (1 / 7 + 2 / 8 + 3 / 9 + 4 / 10) / 10
    assert ex.aurc(score, y, draws=50, seed=0) == pytest.approx(full, abs=1e-12)
    # 0.737 * 10 = 7.37: coverage levels 1/10 .. 7/10
    assert ex.aurc(score, y, draws=50, seed=0, max_coverage=0.737) == pytest.approx((1 / 7) / 7, abs=1e-12)


def test_aurc_truncation_keeps_737_of_1000():
    y = np.zeros(1000, dtype=bool)
    y[:737] = True
    score = -np.arange(1000, dtype=float)
    # the first 737 levels are error-free only if k = 737 is kept and k = 738 is not
    assert ex.aurc(score, y, draws=1, seed=0, max_coverage=0.737) == 0.0


def _expected_risk_curve(score, correct):
    """Exact expectation of the selective risk under uniform tie-breaking, tier by tier."""
    order = np.unique(-score)
    n, errors_before, taken, out = score.size, 0.0, 0, []
    for value in order:
        members = -score == value
        size, wrong = int(members.sum()), int((~correct[members]).sum())
        for j in range(1, size + 1):
            out.append((errors_before + j * wrong / size) / (taken + j))
        errors_before += wrong
        taken += size
    assert len(out) == n
    return np.array(out)


def test_aurc_of_a_binary_flag_averages_ties():
    flag = np.array([1, 1, 0, 0], dtype=float)
    y = np.array([1, 0, 1, 0], dtype=bool)
    # every ordering inside a tier is equally likely: expected risk is 1/2 at every coverage level
    assert _expected_risk_curve(flag, y) == pytest.approx([0.5] * 4)
    # 50 draws estimate it; the draws are seeded, so the value is reproducible
    value = ex.aurc(flag, y, draws=50, seed=7)
    assert value == ex.aurc(flag, y, draws=50, seed=7)
    assert abs(value - 0.5) < 0.1
    # and converges on the exact tie-averaged area
    assert ex.aurc(flag, y, draws=20000, seed=7) == pytest.approx(0.5, abs=0.005)


def test_tie_averaged_curve_converges_on_exact_expectation():
    r = planted_records(200, 3)
    y = r["correct"].to_numpy(dtype=bool)
    for name in ("monotone", "violations"):
        score = ex.SIGNALS[name].score(r)
        curve = ex.selective_risk_curve(score, y, draws=4000, seed=11)
        np.testing.assert_allclose(curve, _expected_risk_curve(score, y), atol=0.02)


def test_aurc_ignores_draws_when_there_are_no_ties():
    y = np.array([1, 0, 1, 1, 0], dtype=bool)
    score = np.array([0.9, 0.8, 0.7, 0.2, 0.1])
    risks = [0 / 1, 1 / 2, 1 / 3, 1 / 4, 2 / 5]
    assert ex.aurc(score, y, draws=3, seed=1) == pytest.approx(np.mean(risks), abs=1e-12)
    assert ex.aurc(score, y, draws=3, seed=2) == ex.aurc(score, y, draws=3, seed=1)


# ---------------------------------------------------------------------------------------------
# Logistic regression, partial correlation, violation magnitude (section 6.1, F.3)


def test_standardized_logit_matches_sklearn_and_recovers_planted_coefficients():
    rng = np.random.default_rng(4)
    n = 6000
    frame = pd.DataFrame(
        {"monotone": rng.random(n) < 0.6, "n_points": rng.integers(2, 9, n), "final_entropy": rng.gamma(2.0, 0.3, n)}
    )
    z = (frame - frame.mean()) / frame.std(ddof=0)
    truth = {"const": 0.5, "monotone": 0.4, "n_points": -0.2, "final_entropy": -1.0}
    eta = truth["const"] + sum(truth[t] * z[t] for t in ex.LOGIT_TERMS)
    frame["correct"] = rng.random(n) < 1 / (1 + np.exp(-eta))
    frame["excluded"] = False
    fit = ex.standardized_logit(frame)
    assert fit.reason is None
    sk = LogisticRegression(C=np.inf, max_iter=1000, tol=1e-10).fit(z.to_numpy(), frame["correct"])
    assert fit.coef["const"] == pytest.approx(sk.intercept_[0], abs=1e-4)
    for i, term in enumerate(ex.LOGIT_TERMS):
        assert fit.coef[term] == pytest.approx(sk.coef_[0][i], abs=1e-4)
        assert abs(fit.coef[term] - truth[term]) < 4 * fit.se[term]


def test_standardized_logit_names_a_constant_term():
    frame = pd.DataFrame(
        {
            "monotone": [True] * 6,
            "n_points": [2, 3, 4, 5, 6, 7],
            "final_entropy": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
            "correct": [True, False] * 3,
            "excluded": False,
        }
    )
    fit = ex.standardized_logit(frame)
    assert fit.coef is None and "monotone" in fit.reason


def test_partial_correlation_matches_ols_residuals_and_t_test():
    rng = np.random.default_rng(5)
    n = 500
    c = rng.integers(2, 9, n).astype(float)
    x = (rng.random(n) < 1 / (1 + np.exp(c - 5))).astype(float)
    y = (rng.random(n) < 0.3 + 0.05 * c + 0.15 * x).astype(float)
    r, p = ex.partial_correlation(x, y, c)
    design = sm.add_constant(c)
    rx, ry = sm.OLS(x, design).fit().resid, sm.OLS(y, design).fit().resid
    assert r == pytest.approx(sps.pearsonr(rx, ry).statistic, abs=1e-10)
    full = sm.OLS(y, sm.add_constant(np.column_stack([x, c]))).fit()
    assert p == pytest.approx(full.pvalues[1], rel=1e-6)


def test_partial_correlation_vanishes_when_the_association_runs_through_the_covariate():
    rng = np.random.default_rng(6)
    n = 20000
    c = rng.normal(size=n)
    x, y = c + rng.normal(size=n), c + rng.normal(size=n)
    assert sps.pearsonr(x, y).statistic > 0.4  # marginally correlated
    r, _ = ex.partial_correlation(x, y, c)
    assert abs(r) < 0.03


def test_violation_magnitude_is_scipy_spearman_over_non_monotone_chains():
    r = planted_records(500, 7)
    res = ex.violation_magnitude(r)
    non = r[~r["monotone"]]
    rise = [max(b - a for a, b in zip(t, t[1:])) for t in non["trajectory"]]
    expect = sps.spearmanr(rise, non["correct"].astype(float))
    assert res["n_nonmonotone"] == len(non)
    assert res["rho"] == pytest.approx(expect.statistic, abs=1e-12)
    assert res["p"] == pytest.approx(expect.pvalue, rel=1e-9)
    assert ex.max_rise([1.0, 0.5, 0.9, 0.2, 0.5]) == pytest.approx(0.4)


# ---------------------------------------------------------------------------------------------
# Label coupling, early exit, epsilon sweep


def test_label_coupling_by_hand():
    frame = records_frame(
        monotone=[True, True, False, False],
        violations=[0, 0, 1, 2],
        final_entropy=[0.0, 0.5, 0.7, 1.0],
        coherence=[1.0, 0.5, 0.2, -0.1],
        pred=["1", "2", "3", None],
        chain_answer=["1", "5", "3", "4"],
        correct=[True, False, True, False],
        chain_correct=[True, True, True, False],
    )
    out = ex.label_coupling(frame)
    assert out["answer_agreement"] == 0.5  # rows 0 and 2
    assert out["label_agreement"] == 0.75
    assert out["roc_final_entropy_majority"] == pytest.approx(roc_auc_score(frame["correct"], -frame["final_entropy"]))
    assert out["roc_final_entropy_chain"] == pytest.approx(
        roc_auc_score(frame["chain_correct"], -frame["final_entropy"])
    )


def test_early_exit_uses_only_the_first_k_transitions():
    frame = records_frame(
        trajectory=[[1.0, 0.5, 0.8], [1.0, 1.2, 0.0], [1.0, 0.5, 0.2, 0.6], [0.5, 0.0]],
        correct=[True, False, True, False],
    )
    assert list(frame["n_points"]) == [3, 3, 4, 2]
    rows = {r["transitions"]: r for r in ex.early_exit(frame, epsilon=0.01, idx=None)}
    assert sorted(rows) == [1, 2, 3]
    # k=1: monotone = [T, F, T, T] -> acc 2/3 vs 0/1
    assert rows[1]["coverage"] == 0.75 and rows[1]["gap_pp"] == pytest.approx(100 * 2 / 3)
    # k=2: [F, F, T, T] -> 1/2 vs 1/2
    assert rows[2]["gap_pp"] == pytest.approx(0.0)
    # k=3: [F, F, F, T] -> 0/1 vs 2/3; only one chain has 3 transitions
    assert rows[3]["gap_pp"] == pytest.approx(-100 * 2 / 3) and rows[3]["n_reaching_k"] == 1


def test_epsilon_sweep_recomputes_shape_and_reports_grid_spacing():
    frame = records_frame(
        trajectory=[[1.0, 1.03, 0.0], [1.0, 1.2, 0.0], [1.0, 0.5, 0.0], [0.7, 0.7, 0.0]],
        correct=[True, False, True, False],
    )
    rows = {r["epsilon"]: r for r in ex.epsilon_sweep(frame, m=5, idx=None)}
    assert [rows[e]["coverage"] for e in ex.EPSILONS] == [0.5, 0.5, 0.75, 0.75]
    assert rows[0.05]["n_changed_vs_min_epsilon"] == 1
    # independent grid: every entropy of a count vector over at most 5 answers
    values = set()
    for n in range(1, 6):
        for counts in itertools.product(range(n + 1), repeat=n):
            if sum(counts) == n:
                values.add(round(-sum(c / n * math.log(c / n) for c in counts if c), 12))
    spacing = float(np.diff(sorted(values)).min())
    assert rows[0.0]["min_grid_spacing"] == pytest.approx(spacing, abs=1e-10)
    assert rows[0.01]["below_spacing"] is True and rows[0.05]["below_spacing"] is False


# ---------------------------------------------------------------------------------------------
# Coverage curves (section 5.1): censored chains are never observations


def test_coverage_curve_by_hand_with_censored_chains():
    curve = ex.coverage_curve([100, 200, 200, 300, 600, 600], [False, False, False, False, True, True])
    assert curve.lengths.tolist() == [100, 200, 300]  # 600 is never an observation
    assert curve.completed == pytest.approx([1 / 6, 3 / 6, 4 / 6])
    assert (curve.n, curve.n_censored, curve.cap, curve.end_censored) == (6, 2, 600, True)
    assert curve.at(250) == pytest.approx(0.5) and curve.at(50) == 0.0 and curve.at(600) == pytest.approx(4 / 6)
    full = ex.coverage_curve([100, 200], [False, False])
    assert full.completed[-1] == 1.0 and not full.end_censored and full.cap is None


def test_coverage_curve_matches_statsmodels_kaplan_meier_with_mixed_censoring():
    rng = np.random.default_rng(8)
    t = rng.integers(10, 200, 300)
    censored = rng.random(300) < 0.3
    curve = ex.coverage_curve(t, censored)
    km = SurvfuncRight(t, (~censored).astype(int))
    np.testing.assert_allclose(curve.lengths, km.surv_times)
    np.testing.assert_allclose(curve.completed, 1 - km.surv_prob, atol=1e-12)


def test_coverage_figure_does_not_draw_censored_chains_as_observations():
    curve = ex.coverage_curve([100, 200, 600, 600], [False, False, True, True])
    ax = figures.coverage_figure({"a-gsm8k": curve}).axes[0]
    step, end = ax.lines[0], ax.lines[1]
    assert max(step.get_xdata()) == 200 and max(step.get_ydata()) == 0.5
    assert end.get_markerfacecolor() == "none"  # hollow: the curve stops with chains censored
    filled = figures.coverage_figure({"a-gsm8k": ex.coverage_curve([1, 2], [False, False])}).axes[0].lines[1]
    assert filled.get_markerfacecolor() != "none"


# ---------------------------------------------------------------------------------------------
# Sweep table, header, writers


def test_sweep_table_deltas_against_registered():
    base = {
        "n": 100,
        "n_excluded": 2,
        "accuracy": 0.5,
        "monotone_coverage": 0.6,
        "gap_pp": 20.0,
        "truncation_rate": 0.36,
        "cap_hit_rate": 0.4,
    }
    other = base | {"accuracy": 0.55, "truncation_rate": 0.032, "gap_pp": 25.0}
    lengths = {
        "registered": {"c-math500": {"median_reference_tokens": 470.0, "p90_reference_tokens": 600.0}},
        "b1280": {"c-math500": {"median_reference_tokens": 471.0, "p90_reference_tokens": 1019.0}},
    }
    rows = ex.sweep_table({"b1280": {"c-math500": other}, "registered": {"c-math500": base}}, chain_lengths=lengths)
    assert [r["variant"] for r in rows] == ["registered", "b1280"]
    b = rows[1]
    assert b["delta_accuracy"] == pytest.approx(0.05) and b["delta_gap_pp"] == pytest.approx(5.0)
    assert b["delta_truncation_rate"] == pytest.approx(-0.328) and b["delta_p90_reference_tokens"] == 419.0
    assert rows[0]["delta_accuracy"] == 0.0
    with pytest.raises(KeyError, match="registered"):
        ex.sweep_table({"b1280": {"c-math500": other}})


def test_chain_length_stats():
    frame = pd.DataFrame({"reference_tokens": list(range(1, 11))})
    assert ex.chain_length_stats(frame) == {
        "median_reference_tokens": 5.5,
        "p90_reference_tokens": float(np.quantile(range(1, 11), 0.9)),
    }


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="final_entropy"):
        report.exploratory_tables(planted_records(5, 0).drop(columns="final_entropy"), m=5, epsilon=0.01, seed=1)


def test_report_header_lists_plan_hash_and_deviations():
    text = report_header(
        "b1280",
        {"plan_sha256": "abc123"},
        {
            "plan_sha256": "abc123",
            "registered": {"date": "2026-11-30"},
            "cells": {
                "q-math500": {"confirmatory": True, "deviations": ["reference_budget: 600 -> 1280"]},
                "q-gsm8k": {
                    "confirmatory": False,
                    "differences": {"b1280": [{"parameter": "m", "registered": 5, "used": 10}]},
                },
            },
        },
    )
    assert "``abc123``" in text and "reference_budget: 600 -> 1280" in text and "m: 5 -> 10" in text


def test_write_exploratory_is_byte_identical(tmp_path):
    records = pd.concat([planted_records(120, 9), planted_records(80, 10, cell="qwen7b-math500")], ignore_index=True)
    kwargs = dict(m=5, epsilon=0.01, seed=20260829, draws=10, resamples=50)
    first = report.write_exploratory(records, tmp_path / "a", **kwargs)
    second = report.write_exploratory(records, tmp_path / "b", **kwargs)
    assert [p.name for p in first] == [f"{t}.csv" for t in report.TABLES] + [report.TABLES_HTML] + list(report.FIGURES)
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name
    ranking = pd.read_csv(tmp_path / "a" / "ranking.csv")
    assert set(ranking["cell"]) == {"qwen7b-gsm8k", "qwen7b-math500"}


def test_tables_html_rounds_where_the_csv_keeps_full_precision():
    frame = pd.DataFrame({"cell": ["a", "b"], "coef": [None, 0.1234567890123], "n": [1, 2]})
    html = report.tables_html({"logistic": frame}, "t")
    assert "None" not in html and "nan" not in html and "0.1235" in html and "0.12346" not in html
