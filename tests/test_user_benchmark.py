"""A researcher's own multiple-choice JSONL through every rule of the DAG (in process,
tests/inprocess.py), on the simulated backend and on the embedded SmolLM2: answers extracted and
scored as choices, and the audit passes (cotdyn.grading.registry, kind jsonl)."""

import json

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from inprocess import run_study

from cotdyn.audit.check import audit
from cotdyn.grading.answers import answers_or_none

OPTIONS = ["red", "green", "blue", "yellow"]
N = 24


def mc_rows() -> list[dict]:
    """Distinct questions, their gold given by letter or by the option's text."""
    rows = []
    for i in range(N):
        key = "ABCD"[i % 4]
        gold = key if i % 3 else OPTIONS[i % 4]
        rows.append(
            {"uid": f"mc-{i:02d}", "prompt": f"Which colour is number {i}?", "choices": OPTIONS, "answer": gold}
        )
    return rows


@pytest.mark.slow
def test_a_multiple_choice_jsonl_runs_through_the_dag_and_is_scored_as_choices(tmp_path):
    data = tmp_path / "mc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in mc_rows()))
    config = {
        "study": "mc",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(tmp_path / "cache"),
        "cells": ["sim-mc"],
        "models": {"sim": {"backend": "simulated", "planted": {"conflicting_rate": 0.2, "boxed_rate": 0.2}}},
        "benchmarks": {
            "mc": {
                "kind": "jsonl",
                "path": str(data),
                "fields": {"question": "prompt", "gold": "answer", "id": "uid", "options": "choices"},
                "answer": "choice",
            }
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    run_study(path, tmp_path)
    study = tmp_path / "results" / "mc"
    problems = pd.read_parquet(study / "problems/mc.parquet")
    assert problems["gold"].tolist() == ["ABCD"[i % 4] for i in range(N)]
    assert "(A) red\n(B) green\n(C) blue\n(D) yellow" in problems["question"][0]
    samples = pd.read_parquet(study / "cells/sim-mc/registered/samples.parquet")
    answered = [a for a in answers_or_none(samples["answer"]) if a is not None]
    assert answered and set(answered) <= set("ABCD")
    assert len(set(answered)) == 4  # wrong options too, not only the gold
    records = pd.read_parquet(study / "cells/sim-mc/registered/records.parquet")
    assert len(records) == N
    scored = records[records["pred"].notna()]
    assert (scored["correct"] == (scored["pred"] == scored["gold"])).all()
    assert scored["correct"].any() and not scored["correct"].all()
    audited = audit(study, config["plan"], cache=config["cache"])
    assert audited.ok, audited.text()


EASY = [
    ("What is 2 + 3?", ["4", "5", "6"], "B"),
    ("What colour is the sky on a clear day?", ["green", "red", "blue"], "C"),
]


def embedded_mc_config(root) -> dict:
    """SmolLM2-135M (the embedded default's model) on two easy questions, with budgets cut to keep
    it to minutes; conftest's ``smollm2_study`` runs it once for this module and test_regenerate."""
    data = root / "mc.jsonl"
    data.write_text("".join(json.dumps({"q": q, "opts": o, "key": k}) + "\n" for q, o, k in EASY))
    embedded = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return {
        "study": "mc",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(root / "cache"),
        "cells": ["smollm2-mc"],
        "protocol": {"dtype": "float32", "reference_max_tokens": 64, "continuation_max_tokens": 24, "m": 3},
        "models": {"smollm2": embedded["models"]["smollm2"]},
        "benchmarks": {
            "mc": {
                "kind": "jsonl",
                "path": str(data),
                "fields": {"question": "q", "gold": "key", "options": "opts"},
                "answer": "choice",
            }
        },
    }


def test_a_multiple_choice_jsonl_runs_through_the_dag_on_the_embedded_model(smollm2_study):
    """Every rule finishes, every answer is a letter or none, and the audit passes."""
    cell = smollm2_study / "results" / "mc" / "cells" / "smollm2-mc"
    samples = pd.read_parquet(cell / "registered" / "samples.parquet")
    assert set(answers_or_none(samples["answer"])) <= {"A", "B", "C", None}
    assert samples["answer"].notna().any()  # the model names options, and they are read
    assert set(samples.loc[samples["answer"].isna(), "status"]) <= {"no_answer"}
    records = pd.read_parquet(cell / "registered" / "records.parquet")
    assert records["gold"].tolist() == ["B", "C"]
    scored = records[records["pred"].notna()]
    assert (scored["correct"] == (scored["pred"] == scored["gold"])).all()
    config = yaml.safe_load((smollm2_study / "study.yaml").read_text())
    audited = audit(smollm2_study / "results" / "mc", config["plan"], cache=config["cache"])
    assert audited.ok, audited.text()
