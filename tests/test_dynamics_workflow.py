"""Seed 002 through the DAG on the simulated backend: sampled and forced endpoints, Figure 4."""

import pandas as pd
import pytest
from conftest import DATA, ROOT
from test_workflow import _write, snakemake

from cotdyn.files.layout import DYNAMICS_FILES, INTERVENTION_FILES
from cotdyn.methods import dynamics as dyn


@pytest.mark.slow
def test_sampled_and_forced_endpoints_and_figure4_run_through_the_dag(tmp_path):
    seed002 = {"checkpoints": "tokens", "m": 8, "null_answers": "class"}
    planted = {"units_median": 3.0, "unit_chars": 40}
    config = {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(tmp_path / "cache"),
        "cells": ["a-gsm8k", "b-gsm8k"],
        # half of model a's chains state an answer other than their continuations' dominant one
        "models": {
            "a": {"backend": "simulated", "planted": {**planted, "off_mode_share": 0.5}},
            "b": {"backend": "simulated", "planted": {**planted, "accuracy_monotone": 0.95}},
        },
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 16}},
        "variants": {
            "sampled": {**seed002, "endpoint": "reasoning"},
            "forced": {**seed002, "endpoint": "forced", "subsample_of": "sampled"},
        },
        "dynamics_comparisons": {
            "default_variant": "sampled",
            "families": {"model": [{"reference": {"model": "a"}, "intervened": {"model": "b"}}]},
        },
    }
    study = tmp_path / "results" / "t"
    targets = [f"results/t/analysis/{v}/dynamics/{name}" for v in ("sampled", "forced") for name in DYNAMICS_FILES]
    targets += [f"results/t/{path}" for path in INTERVENTION_FILES]
    result = snakemake(*targets, "--cores", "2", "--configfile", str(_write(tmp_path, config)), cwd=tmp_path)
    assert result.returncode == 0, result.output[-3000:]
    sampled = pd.read_csv(study / "analysis/sampled/dynamics/profiles.csv")
    forced = pd.read_csv(study / "analysis/forced/dynamics/profiles.csv")
    off_mode = {"fragile_success", "stochastic_miss"}
    assert sampled["mechanism"].isin(off_mode).sum() >= 4  # expected 8 of model a's 16
    # forced to the chain's own answer, gold dominance at K is the outcome itself
    assert not forced["mechanism"].isin(off_mode).any()
    assert set(sampled["mechanism"].dropna()) <= set(dyn.SUCCESS_MECHANISMS + dyn.FAILURE_MECHANISMS)
    # the last checkpoint is the chain cut before its answer: shorter than the whole chain
    chains = pd.read_parquet(next(study.glob("cells/a-gsm8k/reference/*/chains.parquet")))
    samples = pd.read_parquet(study / "cells/a-gsm8k/sampled/samples.parquet")
    last = samples.groupby("problem_id")["prefix_tokens"].max()
    whole = chains.set_index("problem_id")["reference_tokens"]
    assert (last < whole.reindex(last.index)).all()
    effects = pd.read_csv(study / INTERVENTION_FILES[2])
    assert set(effects["metric"]) == {"accuracy", *dyn.PROFILE_METRICS} and (effects["n"] <= 1).all()
