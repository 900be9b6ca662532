"""Plan version 4's analysis keys (issue 49; docs/reference.md section 5): each read from the plan, each
earlier version's behaviour through hypotheses.inputs.PLAN_V3_UNREGISTERED, a v4 plan refused where it
leaves one out or names an unknown value, and the rules they select: H3's permutation p-value, the H5
zero-width rule, perfect separation, no criterion.over, the registered interval and quantile rule."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from cotdyn import stats
from cotdyn.analysis.hypotheses import Settings, analyze
from cotdyn.analysis.hypotheses.cells import h1_shape_contrast, h3_graded_signal, zero_width_rule
from cotdyn.analysis.hypotheses.inputs import CellData
from cotdyn.plan.load import load_plan
from cotdyn.stats import Interval

ROOT = Path(__file__).resolve().parents[1]
PREREG = ROOT / "preregistration"
V1, V2, V3 = (load_plan(PREREG / v / "plan.yaml") for v in ("v1", "v2", "v3"))
V4 = load_plan(PREREG / "v4" / "plan.yaml")  # registered, kept; plan v5 reads the same rules

KEYS = {  # each key v4 registers: where it lives in the plan
    "spearman_tests": ("analysis", "p_values"),
    "interval": ("analysis", "bootstrap"),
    "quantile_rule": ("analysis", "bootstrap"),
    "zero_width": ("verdict_rule",),
    "perfect_separation": ("verdict_rule",),
}
UNKNOWN = {  # an unknown value of each, and the name its error gives
    "interval": ("bca", "analysis.bootstrap.interval"),
    "quantile_rule": ("hazen", "analysis.bootstrap.quantile_rule"),
    "zero_width": (["H1", "H6"], "verdict_rule.zero_width"),
    "perfect_separation": ("supported", "verdict_rule.perfect_separation"),
    "spearman_tests": ({"H2": {"kind": "t_approximation"}, "H3": {"kind": "exact"}}, "spearman_tests.H3.kind"),
}


def _block(plan: dict, path: tuple[str, ...]) -> dict:
    for key in path:
        plan = plan[key]
    return plan


def test_v4_is_read_and_v1_to_v3_keep_the_behaviour_they_registered():
    s4 = Settings.from_plan(V4)
    assert s4.spearman_tests["H3"] == {"kind": "permutation", "resamples": 9999, "seed": 20260829}
    assert s4.spearman_tests["H2"] == {"kind": "t_approximation"}
    assert (s4.interval, s4.quantile_rule, s4.perfect_separation) == ("percentile", "linear", "estimate")
    assert s4.zero_width == ("H1", "H2", "H3", "H4", "H5")
    assert "spearman_tests" not in s4.alternatives  # the alternatives stay what v1-v3 report
    for plan in (V1, V2, V3):
        s = Settings.from_plan(plan)
        assert s.spearman_tests == {"H2": {"kind": "t_approximation"}, "H3": {"kind": "t_approximation"}}
        assert (s.interval, s.quantile_rule, s.perfect_separation) == ("percentile", "linear", "not_estimable")
        assert s.zero_width == ("H1", "H2", "H3", "H4")


@pytest.mark.parametrize("key", sorted(KEYS))
def test_a_v4_plan_must_name_each_key(key):
    plan = copy.deepcopy(V4)
    del _block(plan, KEYS[key])[key]
    with pytest.raises(KeyError, match=key):
        Settings.from_plan(plan)


@pytest.mark.parametrize("key", sorted(UNKNOWN))
def test_a_v4_plan_with_an_unknown_value_is_refused_by_name(key):
    plan = copy.deepcopy(V4)
    value, name = UNKNOWN[key]
    _block(plan, KEYS[key])[key] = value
    with pytest.raises(ValueError, match=name):
        Settings.from_plan(plan)


@pytest.mark.parametrize("hid, missing", [("H3", "H3"), ("H3", "resamples"), ("H3", "seed")])
def test_each_spearman_test_is_named_in_full(hid, missing):
    plan = copy.deepcopy(V4)
    tests = plan["analysis"]["p_values"]["spearman_tests"]
    if missing == hid:
        del tests[hid]
    else:
        del tests[hid][missing]
    with pytest.raises(KeyError, match=missing):
        Settings.from_plan(plan)


def test_criterion_over_is_refused_under_v4_and_accepted_under_v1_to_v3():
    plan = copy.deepcopy(V4)
    plan["hypotheses"][0]["criterion"]["over"] = "all_cells"
    with pytest.raises(ValueError, match="criterion.over is not a key of plan version 4"):
        Settings.from_plan(plan)
    for old in (V1, V2, V3):
        assert all("over" in h["criterion"] for h in old["hypotheses"] if h["criterion"]["kind"] != "estimation")
        Settings.from_plan(old)


def _cell(violations, correct, monotone=None) -> CellData:
    violations, correct = np.asarray(violations, dtype=float), np.asarray(correct, dtype=bool)
    monotone = violations == 0 if monotone is None else np.asarray(monotone, dtype=bool)
    features = np.column_stack([violations, np.full(violations.size, 0.5)])
    return CellData("m-b", violations.size, 0, monotone, correct, violations, violations, features,
                    np.full(violations.size, 5.0), None, None)  # fmt: skip


def test_h3_p_under_v4_is_the_seeded_permutation_test_and_h2_keeps_the_t_approximation():
    rng = np.random.default_rng(4)
    d = _cell(rng.integers(0, 4, 200), rng.random(200) < 0.6)
    s4, s3 = Settings.from_plan(V4), Settings.from_plan(V3)
    idx = stats.cell_resamples(s4.seed, d.cell, d.n, 200)
    seed = stats.derive_seed(20260829, "m-b", "H3 permutation")
    assert h3_graded_signal(d, idx, s4)["p_spearman"] == stats.spearman_permutation_p(
        d.violations, d.correct, "less", 9999, seed
    )
    assert h3_graded_signal(d, idx, s3)["p_spearman"] == stats.spearman_p(d.violations, d.correct, "less")


def test_perfect_separation_is_an_estimate_decided_by_its_criterion_under_v4():
    """A gap of 100 pp between groups of 40: every resample gives 100. v3 read it not_estimable
    through the zero-width rule; v4 reports it with the reason and lets the criterion decide."""
    monotone = np.arange(80) < 40
    d = _cell(np.where(monotone, 0, 2), monotone)
    idx = stats.cell_resamples(1, d.cell, d.n, 300)
    h1_v4, _ = h1_shape_contrast(d, idx, Settings.from_plan(V4))
    h1_v3, _ = h1_shape_contrast(d, idx, Settings.from_plan(V3))
    assert h1_v4["ci"] == [100.0, 100.0] and h1_v4["ci_trusted"] is True
    assert h1_v4["reason"].startswith("perfect separation")
    assert h1_v3["ci_trusted"] is False and "zero-width interval [100, 100]" in h1_v3["flags"][-1]
    # rho at its bound (-1): violations take two values, aligned with correctness
    h3 = h3_graded_signal(d, idx, Settings.from_plan(V4))
    assert h3["ci"] == [-1.0, -1.0] and h3["ci_trusted"] is True and h3["reason"].startswith("perfect separation")


def test_a_zero_width_interval_inside_the_range_stays_not_estimable_under_v4():
    s4 = Settings.from_plan(V4)
    for hid in ("H1", "H2", "H3", "H4", "H5"):
        assert zero_width_rule(Interval(0.0, 0.0, 1000, 1000), s4, hid)["ci_trusted"] is False
    assert zero_width_rule(Interval(0.0, 0.0, 1000, 1000), Settings.from_plan(V3), "H5") == {}  # v3: no H5 rule
    # the H4 difference has no perfect separation: its bound is not one of the registered statistics'
    assert zero_width_rule(Interval(100.0, 100.0, 1000, 1000), s4, "H4")["ci_trusted"] is False


def test_the_registered_quantile_rule_reaches_numpy():
    values = np.random.default_rng(2).normal(size=101)
    linear = stats.percentile_interval(values, 0.95, "linear")
    assert linear == stats.percentile_interval(values, 0.95)
    assert linear.as_list() == pytest.approx(np.quantile(values, [0.025, 0.975], method="linear").tolist())
    assert stats.percentile_interval(values, 0.95, "lower") != linear


def test_analysis_under_v4_names_the_computations_it_registers():
    import pandas as pd

    records = pd.read_parquet(ROOT / "tests" / "fixtures" / "golden" / "records.parquet")
    records = records[records["cell"].isin(["qwen7b-gsm8k", "qwen7b-math500"])]
    settings = analyze(records, V4, "0" * 64)["settings"]
    assert settings["spearman_tests"]["H3"]["kind"] == "permutation"
    assert settings["interval"] == {"kind": "percentile", "quantile_rule": "linear"}
    assert settings["zero_width"] == ["H1", "H2", "H3", "H4", "H5"] and settings["perfect_separation"] == "estimate"
    assert "spearman_tests" not in analyze(records, V3, "0" * 64)["settings"]  # v3's bytes unchanged
