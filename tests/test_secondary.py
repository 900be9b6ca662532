"""Seed 003's further analyses (cotdyn.analysis.secondary, secondary_generations) against hand computations, scipy and loops."""

import math

import numpy as np
import pandas as pd
import pytest
from factories import records_frame
from scipy import stats as sps

from cotdyn import stats
from cotdyn.analysis import secondary as sec
from cotdyn.analysis import secondary_generations as gen
from cotdyn.analysis.calibration import PlantedCell, simulate_records

LEVEL = 0.95


@pytest.fixture(scope="module")
def records():
    frame = simulate_records(PlantedCell(200, 0.5, 0.8, 0.6, exclusion_rate=0.05), "qwen7b-gsm8k", seed=4)
    rng = np.random.default_rng(0)
    frame["reference_truncated"] = rng.random(len(frame)) < 0.3
    frame.loc[frame["reference_truncated"], "reference_tokens"] = 600
    frame["endpoint_answered"] = np.where(
        frame["reference_truncated"], rng.random(len(frame)) < 0.9, rng.random(len(frame)) < 0.2
    )
    return frame


def _analyzed(frame):
    return frame[~frame["excluded"]].reset_index(drop=True)


def _percentile(values):
    values = np.asarray(values, dtype=float)
    return list(np.quantile(values[np.isfinite(values)], [0.025, 0.975]))


def _expected_top_k(score, correct, k):
    """Expected accuracy of the top k by descending score under a uniform tie-break, by a loop."""
    order = sorted(range(len(score)), key=lambda i: -score[i])
    cut = score[order[k - 1]]
    above = [i for i in order if score[i] > cut]
    tied = [i for i in order if score[i] == cut]
    return (sum(correct[i] for i in above) + (k - len(above)) * np.mean([correct[i] for i in tied])) / k


def test_coverage_k_keeps_737_of_1000():
    assert sec.coverage_k(0.737, 1000) == 737 and sec.coverage_k(0.737, 300) == 221  # the original's 221 chains


def test_selective_accuracy_of_each_signal_at_fixed_coverage(records):
    idx = stats.cell_resamples(1, "qwen7b-gsm8k", int((~records["excluded"]).sum()), 40)
    out = {r["signal"]: r for r in sec.selective_accuracy(records, 0.737, idx, LEVEL)}
    rows = _analyzed(records)
    y = rows["correct"].to_numpy(bool)
    k = math.floor(0.737 * len(rows))
    score = {"monotone": rows["monotone"].astype(float).to_numpy(), "final_entropy": -rows["final_entropy"].to_numpy()}
    for name, s in score.items():
        assert out[name]["k"] == k
        assert out[name]["selective_accuracy"] == pytest.approx(_expected_top_k(s, y, k))
        draws = stats.accuracy_at_k_draws(stats.descending_tiers(s), y, k, draws=4000, seed=3)
        assert out[name]["selective_accuracy"] == pytest.approx(draws, abs=0.005)  # the draws it replaces
        boot = [_expected_top_k(s[row], y[row], k) for row in idx]
        assert [out[name]["ci_lo"], out[name]["ci_hi"]] == pytest.approx(_percentile(boot))
    assert sec.selective_accuracy(records.iloc[:1], 0.5, None, LEVEL)[0]["reason"].startswith("coverage 0.5")


def test_selective_accuracy_reports_its_filler_and_flags_it():
    # planted (issue 24): the flag covers 0.563 of 1000 chains, below the 0.737 asked for
    n, flagged = 1000, 563
    frame = records_frame(monotone=[True] * flagged + [False] * (n - flagged), violations=0, final_entropy=0.0,
                          coherence=np.arange(n, dtype=float), correct=np.arange(n) % 3 == 0)  # fmt: skip
    out = {r["signal"]: r for r in sec.selective_accuracy(frame, 0.737, None, LEVEL)}
    k = 737
    mono = out["monotone"]
    assert mono["top_tier_coverage"] == pytest.approx(flagged / n)
    assert mono["filler_share"] == pytest.approx((k - flagged) / k)  # 174 of 737 drawn from the unflagged
    assert mono["flags"].startswith("filled: 0.236 of the accepted chains")
    # a constant signal: the cut subsamples its one tier, no filler; a strict ranking has none either
    assert out["violations"]["filler_share"] == 0.0 and out["violations"]["flags"] is None
    assert out["coherence"]["filler_share"] == 0.0 and out["coherence"]["top_tier_coverage"] == 1 / n
    # a flag covering more than asked is cut inside its own tier: no filler, not flagged
    wide = {
        r["signal"]: r for r in sec.selective_accuracy(frame.assign(monotone=np.arange(n) < 900), 0.737, None, LEVEL)
    }
    assert wide["monotone"]["filler_share"] == 0.0 and wide["monotone"]["top_tier_coverage"] == 0.9


def test_early_exit_recovery_by_hand():
    frame = records_frame(
        trajectory=[[1.0, 0.5, 0.8], [1.0, 1.2, 0.0], [1.0, 0.5, 0.2, 0.6], [0.5, 0.0]],
        correct=[True, False, True, False],
    )
    rows = {r["transitions"]: r for r in sec.early_exit_recovery(frame, 0.01, [1, 2, 3], None, LEVEL)}
    # full flags [F, F, F, T]: 0/1 against 2/3; k = 1 flags [T, F, T, T]: 2/3 against 0/1
    assert rows[1]["full_gap_pp"] == pytest.approx(-200 / 3) and rows[1]["gap_pp"] == pytest.approx(200 / 3)
    assert rows[1]["share_recovered"] == pytest.approx(-1.0) and rows[3]["share_recovered"] == pytest.approx(1.0)
    # cost: points 3 + 3 + 4 + 2 = 12; k = 1 uses 2 each (8), k = 2 uses 3, 3, 3, 2 (11)
    assert rows[1]["cost_fraction"] == pytest.approx(8 / 12) and rows[2]["cost_fraction"] == pytest.approx(11 / 12)
    assert rows[3]["cost_fraction"] == 1.0 and rows[1]["ci_lo"] is None
    assert rows[1]["cost_unit"] == "answer-bearing points" and rows[1]["prefix_cost_fraction"] is None


def test_early_exit_reports_prefixes_sampled_beside_points():
    # planted (issue 24): points [0, 2, 3, 4] of 6 prefixes, and a second chain read whole at k >= 1
    frame = records_frame(
        trajectory=[[1.0, 0.8, 0.5, 0.2], [1.0, 0.0]],
        points=[[0, 2, 3, 4], [1, 3]],
        n_prefixes=[6, 5],
        correct=[True, False],
    )
    rows = {r["transitions"]: r for r in sec.early_exit_recovery(frame, 0.01, [1, 2, 3], None, LEVEL)}
    for k, row in rows.items():
        # independent: prefixes through the (k + 1)-th answer-bearing one, or the whole chain
        sampled = [p[k] + 1 if len(p) > k + 1 else n for p, n in zip(frame["points"], frame["n_prefixes"])]
        used = [min(n, k + 1) for n in frame["n_points"]]
        assert row["prefix_cost_fraction"] == pytest.approx(sum(sampled) / 11)
        assert row["cost_fraction"] == pytest.approx(sum(used) / 6)
    assert rows[1]["prefix_cost_fraction"] == pytest.approx((3 + 5) / 11)
    assert rows[2]["prefix_cost_fraction"] == pytest.approx((4 + 5) / 11) and rows[3]["prefix_cost_fraction"] == 1.0
    idx = stats.resample_indices(2, 50, 4)
    boot = sec.early_exit_recovery(frame, 0.01, [1], idx, LEVEL)[0]
    sampled = np.array([3, 5])
    expected = _percentile(sampled[idx].sum(axis=1) / np.array([6, 5])[idx].sum(axis=1))
    assert [boot["prefix_cost_ci_lo"], boot["prefix_cost_ci_hi"]] == pytest.approx(expected)


def test_early_exit_recovery_intervals_are_paired_ratios(records):
    rows = _analyzed(records)
    idx = stats.cell_resamples(1, "qwen7b-gsm8k", len(rows), 60)
    out = sec.early_exit_recovery(records, 0.01, [2], idx, LEVEL)[0]
    y = rows["correct"].to_numpy(bool)
    traj = list(rows["trajectory"])
    full = np.array([all(b - a <= 0.01 for a, b in zip(t, t[1:])) for t in traj])
    early = np.array([all(b - a <= 0.01 for a, b in zip(t[:3], t[1:3])) for t in traj])
    points = rows["n_points"].to_numpy()

    def gap(flag, r):
        return y[r][flag[r]].mean() - y[r][~flag[r]].mean()

    shares = [gap(early, r) / gap(full, r) for r in idx]
    costs = [np.minimum(points[r], 3).sum() / points[r].sum() for r in idx]
    assert out["share_recovered"] == pytest.approx(gap(early, np.arange(len(y))) / gap(full, np.arange(len(y))))
    assert [out["ci_lo"], out["ci_hi"]] == pytest.approx(_percentile(shares))
    assert [out["cost_ci_lo"], out["cost_ci_hi"]] == pytest.approx(_percentile(costs))


def test_length_confound_matches_scipy(records):
    rows = _analyzed(records)
    idx = stats.cell_resamples(1, "qwen7b-gsm8k", len(rows), 40)
    out = {r["measure"]: r for r in sec.length_confound(records, idx, LEVEL)}
    flag = rows["monotone"].to_numpy(bool)
    for measure in ("reference_tokens", "raw_units"):
        x = rows[measure].to_numpy(float)
        ref = sps.spearmanr(x, flag)
        assert out[measure]["rho"] == pytest.approx(ref.statistic) and out[measure]["p"] == pytest.approx(ref.pvalue)
        boot = [sps.spearmanr(x[r], flag[r]).statistic for r in idx]
        assert [out[measure]["ci_lo"], out[measure]["ci_hi"]] == pytest.approx(_percentile(boot))
    # raw units were planted as n_points - 1 + noise: longer chains have more chances to rise
    assert out["raw_units"]["rho"] < 0


def test_endpoint_by_truncation_matches_pandas(records):
    rows = _analyzed(records)
    idx = stats.cell_resamples(1, "qwen7b-gsm8k", len(rows), 50)
    out = {r["chains"]: r for r in sec.endpoint_by_truncation(records, idx, LEVEL)}
    rates = rows.groupby("reference_truncated")["endpoint_answered"].mean()
    assert out["complete"]["endpoint_answered_rate"] == pytest.approx(rates[False])
    assert out["truncated"]["endpoint_answered_rate"] == pytest.approx(rates[True])
    assert out["complete minus truncated"]["endpoint_answered_rate"] == pytest.approx(rates[False] - rates[True])
    t, a = rows["reference_truncated"].to_numpy(bool), rows["endpoint_answered"].to_numpy(bool)
    boot = [a[r][~t[r]].mean() - a[r][t[r]].mean() for r in idx]
    diff = out["complete minus truncated"]
    assert [diff["ci_lo"], diff["ci_hi"]] == pytest.approx(_percentile(boot))
    # the seed's traced sample: 2 of 67 complete chains answered at the end, 33 of 33 truncated
    traced = pd.DataFrame({"excluded": False, "reference_truncated": [False] * 67 + [True] * 33,
                           "endpoint_answered": [True] * 2 + [False] * 65 + [True] * 33})  # fmt: skip
    by = {r["chains"]: r for r in sec.endpoint_by_truncation(traced, None, LEVEL)}
    assert by["complete"]["endpoint_answered_rate"] == pytest.approx(2 / 67)
    assert by["truncated"]["endpoint_answered_rate"] == 1.0 and by["truncated"]["n"] == 33


def test_descriptive_family_is_holm_over_sixteen_tests_by_hand():
    cells = [f"c{i}" for i in range(8)]
    p = np.linspace(0.0005, 0.06, 16)
    result = {"cells": {c: {"H1": {"p_fisher": p[i]}, "H3": {"p_spearman": p[8 + i]}} for i, c in enumerate(cells)}}
    result["cells"]["c7"]["H3"]["p_spearman"] = None  # undefined: enters as 1
    family = [{"id": "H1", "p": "p_fisher"}, {"id": "H3", "p": "p_spearman"}]
    out = sec.descriptive_family(result, family, cells, 0.05)
    assert len(out) == 16 and out[-1]["p"] is None and out[-1]["p_used"] == 1.0
    used = np.array([m["p_used"] for m in out])
    order = np.argsort(used)
    adjusted = np.maximum.accumulate([min(1.0, (16 - j) * used[i]) for j, i in enumerate(order)])
    expected = np.empty(16)
    expected[order] = adjusted
    np.testing.assert_allclose([m["p_adjusted"] for m in out], expected)
    assert [m["reject"] for m in out] == list(expected <= 0.05)


def test_generation_agreement_by_hand():
    a = pd.DataFrame({"problem_id": ["p1", "p2", "p3", "p4", "p5"], "pred": ["1", "2", None, "4", "5"],
                      "correct": [True, False, False, True, True], "monotone": [True, True, False, False, True],
                      "trajectory": [[1.0, 0.5], [1.0, 0.0], [0.5, 0.7], [1.0, 0.5], [0.0, 0.0]],
                      "excluded": [False, False, False, False, True]})  # fmt: skip
    b = a.copy()
    b["pred"] = ["1", "3", None, "4", "5"]
    b["correct"] = [True, True, False, True, True]
    b["trajectory"] = [[1.0, 0.5], [1.0, 0.1], [0.5, 0.7], [1.0, 0.6], [0.0, 0.0]]
    b = b.iloc[::-1].reset_index(drop=True)  # matched by problem id, not by row
    out = {r["agreement_on"]: r for r in gen.generation_agreement(a, b, None, LEVEL)}
    assert out["prediction"]["n"] == 4  # p5 excluded; p3's two missing answers agree (stated)
    assert out["prediction"]["agreement"] == 0.75 and out["prediction"]["n_both_null"] == 1
    assert out["prediction"]["rule"] == "string equality; both null agree"
    assert out["correctness"]["agreement"] == 0.75
    assert out["monotone_flag"]["agreement"] == 1.0 and out["trajectory"]["agreement"] == 0.5
    assert gen.joint_problems(a, b) == 4


def test_generation_agreement_applies_the_variants_equivalence():
    # planted: the same answers written differently; one pair differs, one pair is null on both sides
    a = pd.DataFrame({"problem_id": ["p1", "p2", "p3", "p4"], "pred": ["1,000", "\\frac{1}{2}", "7", None],
                      "correct": True, "monotone": True, "trajectory": [[1.0]] * 4, "excluded": False})  # fmt: skip
    b = a.assign(pred=["1000", "\\dfrac{1}{2}", "8", None])
    out = {r["agreement_on"]: r for r in gen.generation_agreement(a, b, None, LEVEL, None, "math500")}["prediction"]
    # independent: 2 equivalent pairs + 1 null-null of 4; as strings only the null pair would agree
    assert out["agreement"] == 3 / 4 and out["n_both_null"] == 1
    assert out["rule"] == "normalized equivalence; both null agree"
    strings = {r["agreement_on"]: r for r in gen.generation_agreement(a, b, None, LEVEL)}["prediction"]
    assert strings["agreement"] == 1 / 4


def test_seed_spread_by_hand():
    results = {
        f"seed-{i}": {"cells": {"c": {"H1": {"gap_pp": g, "coverage": 0.5}, "H2": {"rho": None}}}}
        for i, g in enumerate([5.2, 13.8, 9.1])
    }
    out = {r["statistic"]: r for r in gen.seed_spread(results, ["c"])}
    gap = out["gap_pp"]
    assert gap["min"] == 5.2 and gap["max"] == 13.8 and gap["range"] == pytest.approx(8.6)
    assert gap["sd"] == pytest.approx(np.std([5.2, 13.8, 9.1], ddof=1)) and gap["value_seed-1"] == 13.8
    assert out["rho_coherence"]["n_defined"] == 0 and out["rho_coherence"]["sd"] is None


def test_budget_probe_by_hand():
    frame = pd.DataFrame({"reference_tokens": [300, 600, 601, 2390, 4096, 4096],
                          "reference_truncated": [False, False, False, False, True, True]})  # fmt: skip
    out = gen.budget_probe(frame, 600, stats.resample_indices(6, 30, 1), LEVEL)
    assert out["completed"] == pytest.approx(2 / 6) and out["longest_uncensored"] == 2390
    assert out["n_censored"] == 2 and out["ci_n_kept"] == 30 and out["n_censored_below_budget"] == 0
    with pytest.raises(ValueError, match="censored at 600"):
        gen.budget_probe(frame.assign(reference_tokens=[300, 600, 600, 600, 600, 600]), 600, None, LEVEL)


def _km_completion(tokens, truncated, budget):
    """statsmodels' product-limit estimate of 1 - S(budget), completion the event."""
    from statsmodels.duration.survfunc import SurvfuncRight

    sf = SurvfuncRight(np.asarray(tokens, float), (~np.asarray(truncated, bool)).astype(int))
    before = sf.surv_times <= budget
    return 1.0 - (sf.surv_prob[before][-1] if before.any() else 1.0)


def test_budget_probe_ci_is_the_kaplan_meier_of_each_resample():
    # planted (issue 24): a chain censored at 450, below the budget 600: the point is 11/35, and
    # the CI must bootstrap that estimator, not the plain share (3/10)
    tokens = [100, 300, 450, 500, 700, 1000, 2390, 4096, 4096, 1280]
    truncated = [False, False, True, False, False, False, False, True, True, True]
    frame = pd.DataFrame({"reference_tokens": tokens, "reference_truncated": truncated})
    idx = stats.resample_indices(10, 200, 3)
    out = gen.budget_probe(frame, 600, idx, LEVEL)
    assert out["completed"] == pytest.approx(11 / 35) and _km_completion(tokens, truncated, 600) == pytest.approx(
        11 / 35
    )
    assert out["n_censored_below_budget"] == 1
    t, c = np.asarray(tokens), np.asarray(truncated)
    boot = [_km_completion(t[row], c[row], 600) for row in idx]
    np.testing.assert_allclose(gen.completion_rows(t, c, 600, idx), boot, atol=1e-12)
    assert [out["ci_lo"], out["ci_hi"]] == pytest.approx(_percentile(boot))
    share = (~c & (t <= 600))[idx].mean(axis=1)
    assert [out["ci_lo"], out["ci_hi"]] != pytest.approx(_percentile(share))


def test_sweep_columns_match_scipy_and_numpy(records):
    rows = _analyzed(records)
    idx = stats.cell_resamples(1, "qwen7b-gsm8k", len(rows), 40)
    out = sec.sweep_columns(records, idx, LEVEL)
    assert out["median_raw_units"] == np.median(records["raw_units"])
    c, y = rows["coherence"].to_numpy(float), rows["correct"].to_numpy(bool)
    assert out["rho_coherence"] == pytest.approx(sps.spearmanr(c, y).statistic)
    boot = [sps.spearmanr(c[r], y[r]).statistic for r in idx]
    assert [out["rho_coherence_ci_lo"], out["rho_coherence_ci_hi"]] == pytest.approx(_percentile(boot))


def test_small_groups_are_null_or_flagged_as_in_the_registered_analysis():
    from types import SimpleNamespace

    groups = SimpleNamespace(min_group_size=10, precise_group_size=30, min_kept_fraction=0.9)

    def traced(n_truncated):
        return pd.DataFrame({"excluded": False, "reference_truncated": [False] * 67 + [True] * n_truncated,
                             "endpoint_answered": [True] * 2 + [False] * 65 + [True] * n_truncated})  # fmt: skip

    idx = stats.resample_indices(67 + 5, 50, 1)
    small = {r["chains"]: r for r in sec.endpoint_by_truncation(traced(5), idx, LEVEL, groups)}
    assert small["truncated"]["endpoint_answered_rate"] is None and small["truncated"]["ci_lo"] is None
    assert "5 truncated (< min_group_size 10)" in small["truncated"]["reason"]
    assert small["complete minus truncated"]["endpoint_answered_rate"] is None
    assert small["complete"]["endpoint_answered_rate"] == pytest.approx(2 / 67) and small["complete"]["flags"] is None
    loose = {r["chains"]: r for r in sec.endpoint_by_truncation(traced(20), None, LEVEL, groups)}
    assert loose["truncated"]["endpoint_answered_rate"] == 1.0
    assert loose["truncated"]["flags"] == "imprecise: 20 truncated (< precise_group_size 30)"
    # without a registered rule (plan version 1) nothing is nulled or flagged
    bare = {r["chains"]: r for r in sec.endpoint_by_truncation(traced(5), None, LEVEL)}
    assert bare["truncated"]["endpoint_answered_rate"] == 1.0 and bare["truncated"]["flags"] is None
    # a bootstrap that kept fewer than 90% of its resamples is flagged: 2 monotone chains of 40
    frame = pd.DataFrame({"excluded": False, "monotone": [True] * 2 + [False] * 38,
                          "reference_tokens": np.arange(40), "raw_units": np.arange(40) % 7})  # fmt: skip
    rows = sec.length_confound(frame, stats.resample_indices(40, 200, 2), LEVEL, groups)
    assert all(r["rho"] is None and "2 monotone (< min_group_size 10)" in r["reason"] for r in rows)
    groups.min_group_size = 2
    rows = sec.length_confound(frame, stats.resample_indices(40, 200, 2), LEVEL, groups)
    assert all(r["rho"] is not None and "imprecise: 2 monotone" in r["flags"] for r in rows)
    assert all("bootstrap kept" in r["flags"] for r in rows)  # (38/40)^40 = 13% draw no monotone chain
