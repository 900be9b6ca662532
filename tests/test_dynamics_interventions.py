"""Seed 002 Figure 4: standardised changes under matched comparisons, checked against planted truth."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from cotdyn.files.writers import png_bytes
from cotdyn.methods import dynamics_interventions as di
from cotdyn.methods.dynamics import PROFILE_METRICS

TASKS = ("gsm8k", "math500")
METRICS = ["accuracy", *PROFILE_METRICS]


def random_conditions(rng, variant="base", models=None):
    """Condition means of 16 models x 2 tasks under one variant, every metric ~ N(0, 1)."""
    models = models or [
        f"f{f}-{size}-{tuned}" for f in range(4) for size in ("small", "large") for tuned in ("base", "it")
    ]
    rows = [{"variant": variant, "model": m, "task": t, **dict(zip(METRICS, rng.normal(size=len(METRICS))))}
            for m in models for t in TASKS]  # fmt: skip
    return pd.DataFrame(rows)


def comparisons():
    return {
        "default_variant": "base",
        "families": {
            "instruction_tuning": [
                {"reference": {"model": f"f{f}-{s}-base"}, "intervened": {"model": f"f{f}-{s}-it"}}
                for f in range(4)
                for s in ("small", "large")
            ],
            "scale": [
                {"reference": {"model": f"f{f}-small-it"}, "intervened": {"model": f"f{f}-large-it"}} for f in range(4)
            ],
        },
    }


def test_changes_and_intervals_match_an_independent_computation():
    conditions = random_conditions(np.random.default_rng(1))
    changes = di.standardized_changes(conditions, comparisons())
    sd = conditions[METRICS].std(ddof=1)
    t = conditions.set_index(["model", "task"])
    assert len(changes) == (8 + 4) * len(METRICS)
    for row in changes.itertuples():
        expected = np.mean([(t.at[(row.intervened_model, k), row.metric] - t.at[(row.reference_model, k), row.metric])
                            / sd[row.metric] for k in TASKS])  # fmt: skip
        assert row.change == pytest.approx(expected) and row.sd == pytest.approx(sd[row.metric])
        assert row.n_tasks == 2
    effects = di.mean_effects(changes)
    assert len(effects) == 2 * len(METRICS)
    for row in effects.itertuples():
        x = changes[(changes.family == row.family) & (changes.metric == row.metric)]["change"].to_numpy()
        lo, hi = scipy.stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=scipy.stats.sem(x))
        assert (row.n, row.mean) == (len(x), pytest.approx(x.mean()))
        assert (row.ci_low, row.ci_high) == (pytest.approx(lo), pytest.approx(hi))


def test_planted_temperature_effects_are_covered_at_the_nominal_rate():
    """Intervened conditions in another variant leave the standardising SD (default decoding only)
    untouched, so a planted shift of mu SD plus pair-level N(0, 0.5) noise is the exact truth; the
    t interval over 4 comparisons must cover mu in about 95% of 200 simulated panels."""
    rng = np.random.default_rng(2026)
    mu, models = 0.6, [f"m{i}" for i in range(6)]
    family = {"default_variant": "base", "families": {"temperature": [
        {"reference": {"model": m}, "intervened": {"model": m, "variant": "t10"}, "tasks": ["gsm8k"]}
        for m in models[:4]]}}  # fmt: skip
    covered, reps = 0, 200
    for _ in range(reps):
        base = random_conditions(rng, models=models)
        sd = base[METRICS].std(ddof=1)
        hot = base.copy()
        hot["variant"] = "t10"
        noise = rng.normal(0, 0.5, size=(len(hot), 1))
        hot[METRICS] = base[METRICS].to_numpy() + (mu + noise) * sd.to_numpy()
        changes = di.standardized_changes(pd.concat([base, hot], ignore_index=True), family)
        assert (changes["tasks"] == "gsm8k").all()
        row = di.mean_effects(changes).set_index("metric").loc["V_per_step"]
        covered += row["ci_low"] <= mu <= row["ci_high"]
    # binomial(200, 0.95): 4 SE is about 0.062
    assert abs(covered / reps - 0.95) < 0.062, covered


def test_degenerate_inputs_give_nan_with_a_reason_and_bad_names_an_error():
    conditions = pd.DataFrame(
        {"variant": "base", "model": ["a", "b"], "task": "gsm8k", "accuracy": [0.5, 0.7],
         **{m: [1.0, 1.0] for m in PROFILE_METRICS}}
    )  # fmt: skip
    one = {
        "default_variant": "base",
        "families": {"scale": [{"reference": {"model": "a"}, "intervened": {"model": "b"}}]},
    }
    changes = di.standardized_changes(conditions, one)
    assert changes.set_index("metric").at["accuracy", "change"] == pytest.approx(0.2 / np.std([0.5, 0.7], ddof=1))
    assert math.isnan(changes.set_index("metric").at["S_eff", "change"])  # no spread across conditions
    effects = di.mean_effects(changes).set_index("metric")
    assert math.isnan(effects.at["accuracy", "ci_low"]) and "fewer than two" in effects.at["accuracy", "ci_note"]
    bad = {
        "default_variant": "base",
        "families": {"scale": [{"reference": {"model": "a"}, "intervened": {"model": "z"}}]},
    }
    with pytest.raises(ValueError, match=r"scale\[0\]: no condition for model 'z' under variant 'base'"):
        di.standardized_changes(conditions, bad)
    with pytest.raises(ValueError, match="default_variant 'nope'"):
        di.standardized_changes(conditions, {"default_variant": "nope", "families": {}})


def test_figure4_is_deterministic():
    conditions = random_conditions(np.random.default_rng(3))
    changes = di.standardized_changes(conditions, comparisons())
    effects = di.mean_effects(changes)
    a = png_bytes(di.interventions_figure(changes, effects))
    b = png_bytes(di.interventions_figure(changes, effects))
    assert a == b and a[:8] == b"\x89PNG\r\n\x1a\n"


def test_comparison_variants_are_checked_against_the_study():
    config = {"default_variant": "base", "families": {"t": [{"reference": {"model": "a", "variant": "t02"},
                                                             "intervened": {"model": "a", "variant": "t10"}}]}}  # fmt: skip
    assert di.comparison_variants(config, ["base", "t02", "t10"]) == ["base", "t02", "t10"]
    with pytest.raises(ValueError, match="unknown variant\\(s\\) t10 \\(known: base, t02\\)"):
        di.comparison_variants(config, ["base", "t02"])


def test_n_tasks_and_tasks_count_only_tasks_defined_on_both_sides():
    # planted (issue 24): t_commit undefined for the intervened model on math500, defined elsewhere
    conditions = random_conditions(np.random.default_rng(7))
    hole = (conditions["model"] == "f0-small-it") & (conditions["task"] == "math500")
    conditions.loc[hole, "t_commit"] = np.nan
    one = {"default_variant": "base", "families": {"it": [comparisons()["families"]["instruction_tuning"][0]]}}
    rows = di.standardized_changes(conditions, one).set_index("metric")
    # independent: pandas pivot, rows where both sides are defined
    wide = conditions.pivot(index="task", columns="model", values="t_commit")
    diff = (wide["f0-small-it"] - wide["f0-small-base"]).dropna()
    sd = conditions["t_commit"].std(ddof=1)
    assert rows.at["t_commit", "n_tasks"] == len(diff) == 1 and rows.at["t_commit", "tasks"] == "gsm8k"
    assert rows.at["t_commit", "change"] == pytest.approx((diff / sd).mean())
    assert rows.at["accuracy", "n_tasks"] == 2 and rows.at["accuracy", "tasks"] == "gsm8k;math500"
