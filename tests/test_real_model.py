"""A weak real model through the whole DAG.

The tiny trained Llama of tests/weak_model.py writes what real models write: arithmetic of its
own, answers that are wrong, chains cut by the token budget, and chains that never state a number.
On 8 GSM8K and 8 MATH-500 problems every rule must finish (run in this process, tests/inprocess.py),
the audit must pass, and a chain without an answer must be recorded as such, not dropped.
"""

import json

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from inprocess import run_study

from cotdyn.audit.check import audit

pytestmark = pytest.mark.slow

CELLS = ["weak-gsm8k", "weak-math500"]
PROBLEMS = 8


def study_config(tmp_path, model_dir, data) -> dict:
    """Two descriptive cells (not confirmatory, so the shorter budgets need no declared deviation)."""
    return {
        "study": "weak",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(tmp_path / "cache"),
        "cells": CELLS,
        # budgets cut from 600/150 tokens to keep the test to minutes; the model's chains are short
        "protocol": {"dtype": "float32", "reference_max_tokens": 120, "continuation_max_tokens": 40},
        "models": {
            "weak": {
                "backend": "transformers",
                "id": str(model_dir),
                "device": "cpu",
                "transformers": {"batch_size": 64},
            }
        },
        "benchmarks": {
            "gsm8k": {"kind": "gsm8k", "path": str(data / "gsm8k_test.jsonl"), "limit": PROBLEMS},
            "math500": {"kind": "math500", "path": str(data / "math500_test.jsonl"), "limit": PROBLEMS},
        },
        "variants": {"registered": {}},
    }


@pytest.fixture(scope="module")
def weak_study(tmp_path_factory, weak_model_dir, data_dir):
    """The default target, then the audit, once for every test of this module."""
    tmp_path = tmp_path_factory.mktemp("weak_study")
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(study_config(tmp_path, weak_model_dir, data_dir)))
    run_study(config, tmp_path)
    study = tmp_path / "results" / "weak"
    return study, audit(study, ROOT / "preregistration" / "plan.yaml", cache=tmp_path / "cache")


def _cell_tables(study, name: str) -> pd.DataFrame:
    """One table (chains, samples, records) of both cells, with a column naming the cell."""
    paths = sorted(study.glob(f"cells/*/**/{name}"))
    assert len(paths) == len(CELLS), paths
    return pd.concat(
        [pd.read_parquet(p).assign(cell_dir=p.relative_to(study / "cells").parts[0]) for p in paths], ignore_index=True
    )


def test_every_problem_keeps_its_record(weak_study):
    study, _ = weak_study
    for cell in CELLS:
        records = pd.read_parquet(study / f"cells/{cell}/registered/records.parquet")
        assert len(records) == PROBLEMS and records["problem_id"].is_unique
        summary = json.loads((study / f"cells/{cell}/registered/summary.json").read_text())
        assert summary["n"] == PROBLEMS


def test_chains_with_and_without_an_answer_are_both_recorded(weak_study):
    study, _ = weak_study
    chains = _cell_tables(study, "chains.parquet")
    records = _cell_tables(study, "records.parquet")
    unanswered = chains["chain_answer"].isna()
    # the mix really happened: the model's talking chains state no number, the others do
    assert 0 < unanswered.sum() < len(chains), chains[["problem_id", "chain_answer"]]
    assert set(chains.loc[unanswered, "chain_status"]) == {"no_answer"}
    assert set(chains.loc[~unanswered, "chain_status"]) == {"ok"}
    assert records["chain_answer"].isna().sum() == unanswered.sum()
    assert not records.loc[records["chain_answer"].isna(), "chain_correct"].any()
    # an excluded chain keeps its row and says why it is excluded
    assert records.loc[records["excluded"], "exclusion_reason"].notna().all()


def test_continuations_without_an_answer_are_kept_with_their_status(weak_study, plan):
    study, _ = weak_study
    samples = _cell_tables(study, "samples.parquet")
    unanswered = samples["answer"].isna()
    assert 0 < unanswered.sum() < len(samples)
    assert set(samples.loc[unanswered, "status"]) == {"no_answer"}
    # every prefix of every chain has its m samples, answered or not
    assert (samples.groupby(["cell_dir", "problem_id", "prefix"]).size() == plan["protocol"]["m"]).all()
    assert samples.groupby("cell_dir")["problem_id"].nunique().to_dict() == dict.fromkeys(CELLS, PROBLEMS)


def test_analysis_covers_both_cells_and_the_study_is_audited(weak_study):
    study, audited = weak_study
    hypotheses = json.loads((study / "analysis/registered/hypotheses.json").read_text())
    for cell in CELLS:
        summary = hypotheses["cells"][cell]["summary"]
        assert summary["status"] == "ok" and summary["n_records"] == PROBLEMS
        # each statistic is estimated or null with its reason (the model is never right: a reason)
        for h in ("H1", "H2", "H3"):
            block = hypotheses["cells"][cell][h]
            assert block["reason"] or None not in block["ci"], (cell, h, block)
    assert (study / "analysis/registered/dynamics/profiles.csv").exists()
    assert (study / "analysis/registered/exploratory/tables.html").exists()
    assert (study / "analysis/registered/math_shepherd.csv").exists()
    assert (study / "manifest/manifest.json").exists()
    assert audited.ok, audited.text()
    assert json.loads((study / "report/audit.json").read_text())["ok"]  # the run's own audit
