"""Seed 000 on the study's own traces: split, steps, Math-Shepherd endpoint, detection, the tiny
supervisor, and the rules through the DAG (in process, tests/inprocess.py; the report by Snakemake)
(docs/reference.md section 9)."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import DATA, ROOT
from factories import records_frame
from inprocess import run_study
from scipy import stats
from sklearn.metrics import confusion_matrix
from test_workflow import side_by_side, snakemake

from cotdyn.methods.infogain import gain
from cotdyn.methods.infogain.traces import (
    aggregate_table,
    chain_scores,
    detection_table,
    leakage,
    split_problems,
    step_chains,
    step_table,
    step_texts,
)
from cotdyn.methods.math_shepherd import math_shepherd_from_samples
from cotdyn.protocol import segment

# ---------------------------------------------------------------------------------------------
# The split.


def test_split_depends_on_the_seed_and_the_id_only():
    ids = [f"q{i}" for i in range(400)]
    whole = split_problems(ids, [0.6, 0.2, 0.2], 3).set_index("problem_id")["split"]
    part = split_problems(ids[::-3][:50], [0.6, 0.2, 0.2], 3).set_index("problem_id")["split"]
    assert (part == whole.loc[part.index]).all()  # order and company do not matter
    other = split_problems(ids, [0.6, 0.2, 0.2], 4).set_index("problem_id")["split"]
    assert (other != whole).mean() > 0.3
    assert split_problems(ids, [0.6, 0.2, 0.2], 3)["problem_id"].tolist() == ids


def test_split_fractions_hold_in_distribution():
    """Chi-square goodness of fit of 6000 hashed ids against 0.6 / 0.2 / 0.2."""
    split = split_problems([f"id-{i}" for i in range(6000)], [0.6, 0.2, 0.2], 0)
    counts = split["split"].value_counts().reindex(["train", "val", "test"]).to_numpy()
    assert stats.chisquare(counts, np.array([0.6, 0.2, 0.2]) * 6000).pvalue > 1e-3
    assert (split_problems(["a", "b", "c"], [1.0, 0.0, 0.0], 0)["split"] == "train").all()


def test_split_refuses_bad_fractions_and_duplicate_ids():
    with pytest.raises(ValueError, match="infogain split"):
        split_problems(["a"], [0.5, 0.5], 0)
    with pytest.raises(ValueError, match="infogain split"):
        split_problems(["a"], [0.6, 0.6, -0.2], 0)
    with pytest.raises(ValueError, match="duplicate"):
        split_problems(["a", "a"], [0.6, 0.2, 0.2], 0)


def test_leakage_check_names_what_leaks():
    split = pd.DataFrame({"problem_id": ["a", "b", "c"], "split": ["train", "val", "test"]})
    clean = {"ok": True, "in_two_splits": [], "trained_outside_train": [], "trained_and_scored": [],
             "scored_question_trained": []}  # fmt: skip
    assert leakage(split, ["a"], ["b", "c"]) == clean
    assert leakage(split, ["a", "c"])["trained_outside_train"] == ["c"]
    doubled = pd.concat([split, pd.DataFrame({"problem_id": ["b"], "split": ["test"]})])
    assert leakage(doubled, ["a"]) == clean | {"ok": False, "in_two_splits": ["b"]}
    # planted: a problem fitted on and scored
    assert leakage(split, ["a"], ["a", "b"]) == clean | {"ok": False, "trained_and_scored": ["a"]}
    # planted: the same question under a train id and a test id (a benchmark duplicate)
    questions = {"a": "What is 2 + 2?", "b": "Name a prime.", "c": "what is 2 +  2?"}
    assert leakage(split, ["a"], ["b", "c"], questions) == clean | {"ok": False, "scored_question_trained": ["c"]}


def test_run_cell_refuses_a_split_that_shares_a_question_between_train_and_test():
    from cotdyn.methods.infogain.real import SupervisorSpec, run_cell

    ids = [f"p{i}" for i in range(6)]
    chains = pd.DataFrame({"problem_id": ids, "text": ["a\n\nb"] * 6, "chain_correct": [True, False] * 3})
    questions = ["q0", "q1", "q2", "q3", "q0", "q5"]  # p4 repeats p0's question
    problems = pd.DataFrame({"problem_id": ids, "question": questions, "gold": ["1"] * 6})
    split = pd.DataFrame({"problem_id": ids, "split": ["train", "train", "val", "val", "test", "test"]})
    out = run_cell(step_chains(chains, problems, "blank_line", 8), split, None, SupervisorSpec(id="never-loaded"))
    assert not out["summary"]["leakage"]["ok"] and out["summary"]["leakage"]["scored_question_trained"] == ["p4"]
    assert out["summary"]["reason"] == "the split leaks: nothing is fitted" and out["steps"].empty


# ---------------------------------------------------------------------------------------------
# Steps are the registered units.


def test_steps_are_the_registered_units_with_the_cap():
    text = "\n\n".join(f"Unit {i}: {i} + 1 = {i + 1}." for i in range(1, 11)) + "\n\nSo the answer is 11."
    steps = step_texts(text, "blank_line", 8)
    spans = segment.cap_units(segment.units(text, "blank_line"), 8)
    assert len(steps) == 8 and steps == [text[a:b] for a, b in spans]
    assert steps[0] == "Unit 1: 1 + 1 = 2." and steps[-1].endswith("So the answer is 11.")
    assert "Unit 9" in steps[-1]  # units 8..N merged into the 8th
    assert step_texts(text, "blank_line", None)[-1] == "So the answer is 11."
    assert step_texts("", "blank_line", 8) == [] and step_texts(None, "newline", 8) == []
    with pytest.raises(ValueError, match="token_window"):
        step_texts(text, "token_window", 8)


def test_step_chains_record_a_status_for_every_chain():
    chains = pd.DataFrame(
        {"problem_id": ["a", "b", "c"], "text": ["x\n\ny", "", "z ٣ Ä"], "chain_correct": [True, False, None]}
    )
    problems = pd.DataFrame({"problem_id": ["a", "b", "c"], "question": ["qa", "qb", "qc"], "gold": ["1", "2", " "]})
    out = step_chains(chains, problems, "blank_line", 8).set_index("problem_id")
    assert out["status"].to_dict() == {"a": "ok", "b": "no_steps", "c": "no_gold"}
    assert out.loc["a", "steps"] == ("x", "y") and out["n_steps"].tolist() == [2, 0, 1]
    assert out["chain_correct"].tolist() == [True, False, False]
    with pytest.raises(KeyError, match="chains.parquet lacks column"):
        step_chains(chains.drop(columns="text"), problems, "blank_line", 8)


# ---------------------------------------------------------------------------------------------
# Math-Shepherd on pipeline samples: the endpoint.


def test_math_shepherd_completes_a_finished_chains_last_prefix_with_the_chain():
    """Problem a: a finished correct chain whose last prefix continues with nothing. Without the
    chain its last step scores 0; with it, 1. b: finished, no answer: 0 either way. c: cut by its
    budget: its sampled completions stand."""
    samples = pd.DataFrame(
        {
            "problem_id": ["a"] * 4 + ["b"] * 4 + ["c"] * 4,
            "prefix": [0, 0, 1, 1] * 3,
            "prefix_tokens": [0, 0, 7, 7] * 3,
            "answer": ["5", "4", None, None, "2", "2", "2", None, "1", "3", "3", None],
        }
    )
    records = records_frame(problem_id=["a", "b", "c"], gold=["5", "2", "3"])
    chains = pd.DataFrame(
        {"problem_id": ["a", "b", "c"], "chain_answer": ["5", None, None], "reference_truncated": [False, False, True]}
    )
    old = math_shepherd_from_samples(samples, records, "gsm8k").set_index(["problem_id", "prefix"])
    new = math_shepherd_from_samples(samples, records, "gsm8k", chains=chains).set_index(["problem_id", "prefix"])
    assert old.loc[("a", 1), "soft"] == 0.0 and new.loc[("a", 1), ["soft", "hard"]].tolist() == [1.0, 1.0]
    assert new.loc[("b", 1), "soft"] == 0.0 and old.loc[("b", 1), "soft"] == 0.5
    assert new.loc[("c", 1), "soft"] == old.loc[("c", 1), "soft"] == 0.5
    assert new["endpoint"].tolist() == [False, True, False, True, False, False]
    assert (new.xs(0, level="prefix")["soft"] == old.xs(0, level="prefix")["soft"]).all()


def _signal_free_cell(n=200, seed=5):
    """Finished chains of 3 steps whose Math-Shepherd labels before the last step are coin flips
    independent of correctness; the last prefix is the chain's own answer (the endpoint)."""
    rng = np.random.default_rng(seed)
    ids = [f"p{i:03d}" for i in range(n)]
    correct = rng.random(n) < 0.5
    rows = []
    for pid, ok in zip(ids, correct):
        for prefix in range(4):
            for j in range(4):
                answer = None if prefix == 3 else ("7" if rng.random() < 0.5 else "8")
                rows.append({"problem_id": pid, "prefix": prefix, "prefix_tokens": 10 * prefix, "answer": answer})
    samples = pd.DataFrame(rows)
    records = records_frame(problem_id=ids, gold="7")
    chains = pd.DataFrame({"problem_id": ids, "chain_answer": np.where(correct, "7", "9"),
                           "reference_truncated": False})  # fmt: skip
    frame = pd.DataFrame({"problem_id": ids, "split": ["val", "test"] * (n // 2), "chain_correct": correct})
    return samples, records, chains, frame, rng


def test_math_shepherd_is_judged_without_its_endpoint_label():
    """Issue 24's planted case: on main MS scored accuracy 1.0 here (its last step is the label)."""
    from sklearn.metrics import roc_curve

    samples, records, chains, frame, rng = _signal_free_cell()
    ms = math_shepherd_from_samples(samples, records, "gsm8k", chains=chains)
    ce = [np.cumsum(rng.normal(size=4)) for _ in range(len(frame))]
    steps = step_table(frame, ce, [rng.random(4) for _ in range(len(frame))], ms)
    assert steps.loc[steps["step"] == 3, "ms_endpoint"].all() and not steps.loc[steps["step"] < 3, "ms_endpoint"].any()
    row = detection_table(steps).query("method == 'MS' and stratum == 'all'").iloc[0]
    # independent: the earlier steps' shares straight from the samples, their minimum per chain
    early = samples[samples["prefix"].isin([1, 2])].assign(hit=lambda f: f["answer"] == "7")
    score = early.groupby(["problem_id", "prefix"])["hit"].mean().groupby("problem_id").min()
    split = frame.set_index("problem_id")
    wrong = ~split["chain_correct"]
    val = split["split"] == "val"
    # the best validation accuracy any threshold on those scores reaches (sklearn's ROC points)
    fpr, tpr, _ = roc_curve(wrong[val], -score[val.index[val]], drop_intermediate=False)
    p, q = wrong[val].sum(), (~wrong[val]).sum()
    best = max(np.max((tpr * p + (1 - fpr) * q) / (p + q)), max(p, q) / (p + q))
    assert row["val_accuracy"] == pytest.approx(best)
    test = val.index[~val]
    flagged = score[test] <= row["threshold"]
    assert row["accuracy"] == pytest.approx((flagged == wrong[test]).mean())
    assert row["accuracy"] < 0.75 and row["n_test"] == 100  # no better than coin-flip steps allow
    assert row["score"] == "min over steps of ms_soft, the endpoint step (the chain's own answer) left out"


def test_detection_is_reported_by_chain_length_and_against_length_alone():
    # planted: long chains are wrong and carry lower minima; within a length stratum the scores are noise
    rng = np.random.default_rng(2)
    rows = []
    for i in range(240):
        long = i % 4 >= 2
        correct = bool(rng.random() < (0.2 if long else 0.8))
        for t in range(1, (8 if long else 2) + 1):
            rows.append({"problem_id": f"p{i}", "split": ("val", "test")[i % 2], "step": t, "n_steps": 8 if long else 2,
                         "chain_correct": correct, "ig": rng.normal(), "orm_probability": rng.random(),
                         "ms_soft": rng.random()})  # fmt: skip
    steps = pd.DataFrame(rows)
    table = detection_table(steps)
    assert set(table["stratum"]) == {"all", "n_steps <= 5", "n_steps > 5"}  # median of 2s and 8s: 5
    length = table.query("method == 'LENGTH' and stratum == 'all'").iloc[0]
    chains = steps.drop_duplicates("problem_id")
    test = chains[chains["split"] == "test"]
    # independent: flag every long chain
    assert length["accuracy"] == pytest.approx(((test["n_steps"] == 8) == ~test["chain_correct"]).mean())
    ig = table.query("method == 'IG'").set_index("stratum")
    scores = chain_scores(steps, "IG").query("split == 'test'")
    for stratum, keep in (("n_steps <= 5", scores["n_steps"] <= 5), ("n_steps > 5", scores["n_steps"] > 5)):
        part = scores[keep]
        tn, fp, fn, tp = confusion_matrix(
            ~part["chain_correct"].astype(bool), part["score"] <= ig.at[stratum, "threshold"], labels=[False, True]
        ).ravel()
        assert ig.loc[stratum, ["tp", "fp", "tn", "fn"]].tolist() == [tp, fp, tn, fn]
        assert ig.at[stratum, "n_test"] == len(part) == 60


# ---------------------------------------------------------------------------------------------
# Tables and detection.


def _steps_frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(60):
        split = ("val", "test")[i % 2]
        correct = bool(rng.random() < 0.5)
        for t in range(1, int(rng.integers(1, 5)) + 1):
            rows.append(
                {
                    "problem_id": f"p{i}",
                    "split": split,
                    "step": t,
                    "chain_correct": correct,
                    "ce_before": 0.0,
                    "ce_after": 0.0,
                    "ig": rng.normal(0.5 if correct else 0.0, 0.3),
                    "orm_probability": rng.random(),
                    "ms_soft": rng.random() if t < 3 else np.nan,
                }
            )
    return pd.DataFrame(rows)


def test_aggregate_table_is_the_ragged_mean_gain():
    rng = np.random.default_rng(1)
    ce = [np.cumsum(rng.normal(0, 1, n)) for n in (2, 3, 5, 4)]
    steps = pd.DataFrame(
        [
            {
                "problem_id": f"p{i}",
                "split": "test",
                "step": t,
                "chain_correct": i % 2 == 0,
                "ce_before": c[t - 1],
                "ce_after": c[t],
                "ig": c[t - 1] - c[t],
            }  # fmt: skip
            for i, c in enumerate(ce)
            for t in range(1, len(c))
        ]
    )
    table = aggregate_table(steps)
    every = table[(table["split"] == "test") & (table["subset"] == "all")]
    np.testing.assert_allclose(every["ig"], gain.aggregate_gain_ragged(ce))
    assert every["n_chains"].tolist() == [4, 3, 2, 1]
    right = table[(table["split"] == "test") & (table["subset"] == "correct_answer")]
    np.testing.assert_allclose(right["ig"], gain.aggregate_gain_ragged([ce[0], ce[2]]))
    assert table[table["split"] == "val"].empty


def test_detection_thresholds_come_from_validation_chains_only():
    steps = _steps_frame()
    table = detection_table(steps).query("stratum == 'all'").set_index("method")
    # the test half changed entirely: thresholds stay, test metrics move
    flipped = steps.copy()
    test = flipped["split"] == "test"
    flipped.loc[test, "chain_correct"] = ~flipped.loc[test, "chain_correct"]
    again = detection_table(flipped).query("stratum == 'all'").set_index("method")
    assert (again["threshold"] == table["threshold"]).all()
    assert (again["accuracy"] != table["accuracy"]).any()
    # the threshold is the validation-accuracy maximiser of the chains' lowest scores
    val = chain_scores(steps, "IG").query("split == 'val'")
    assert table.loc["IG", "threshold"] == gain.select_threshold(val["score"], ~val["chain_correct"].astype(bool))
    per_chain = steps.groupby("problem_id")["ig"].min()
    assert (val.set_index("problem_id")["score"] == per_chain.loc[val["problem_id"]]).all()
    # test metrics against sklearn's confusion matrix
    test_scores = chain_scores(steps, "ORM").query("split == 'test'")
    flagged = test_scores["score"] <= table.loc["ORM", "threshold"]
    tn, fp, fn, tp = confusion_matrix(~test_scores["chain_correct"].astype(bool), flagged, labels=[False, True]).ravel()
    assert table.loc["ORM", ["tp", "fp", "tn", "fn"]].tolist() == [tp, fp, tn, fn]
    assert table.loc["MS", "n_val"] == 30 and table["threshold_source"].eq("val").all()


def test_detection_without_validation_chains_says_why():
    steps = _steps_frame().query("split == 'test'")
    table = detection_table(steps)
    assert table["threshold"].isna().all()
    assert table["reason"].eq("no validation chain with a step score").all()


# ---------------------------------------------------------------------------------------------
# The supervisor and ORM on a tiny random causal model.


def _tiny_spec(model_dir, seed=0):
    from cotdyn.methods.infogain.real import SupervisorSpec

    entry = {
        "id": str(model_dir),
        "lora": {"r": 2, "alpha": 4, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
        "train": {"max_epochs": 2, "batch_size": 8},
    }
    return SupervisorSpec.from_config(entry, seed)


def _toy_cell(n=16):
    ids = [f"p{i}" for i in range(n)]
    text = [f"{i} plus one.\n\nThat is {i + 1}.\n\nAnswer: {i + 1}" if i % 5 else "" for i in range(n)]
    chains = pd.DataFrame({"problem_id": ids, "text": text, "chain_correct": [i % 3 == 0 for i in range(n)]})
    problems = pd.DataFrame({"problem_id": ids, "question": [f"{i}+1?" for i in range(n)], "gold": [str(i + 1) for i in range(n)]})  # fmt: skip
    return step_chains(chains, problems, "blank_line", 8), ids


@pytest.mark.slow
def test_run_cell_trains_on_train_problems_and_scores_the_others(tiny_model_dir):
    from cotdyn.methods.infogain.real import run_cell

    chains, ids = _toy_cell()
    split = split_problems(ids, [0.5, 0.25, 0.25], 0)
    out = run_cell(chains, split, None, _tiny_spec(tiny_model_dir))
    train = set(split.loc[split["split"] == "train", "problem_id"])
    assert out["summary"]["leakage"]["ok"] and set(out["summary"]["train_problem_ids"]) == train
    assert not set(out["steps"]["problem_id"]) & train and set(out["steps"]["split"]) == {"val", "test"}
    scored = chains[~chains["problem_id"].isin(train) & (chains["n_steps"] > 0)]
    assert len(out["steps"]) == scored["n_steps"].sum()  # every step of every scored chain, once
    np.testing.assert_allclose(out["steps"]["ig"], out["steps"]["ce_before"] - out["steps"]["ce_after"])
    assert out["steps"]["orm_probability"].between(0, 1).all() and np.isfinite(out["steps"]["ce_after"]).all()
    assert set(out["training"]["model"]) == {"supervisor", "orm"}
    assert out["detection"].query("stratum == 'all'")["method"].tolist() == ["IG", "ORM", "MS", "LENGTH"]
    again = run_cell(chains, split, None, _tiny_spec(tiny_model_dir))  # same seed: the same bytes
    for name in ("steps", "aggregate", "detection", "training"):
        assert out[name].to_csv(index=False) == again[name].to_csv(index=False), name


def test_run_cell_without_validation_problems_gives_reasons(tiny_model_dir):
    from cotdyn.methods.infogain.real import run_cell

    chains, ids = _toy_cell(6)
    split = pd.DataFrame({"problem_id": ids, "split": ["train"] * 4 + ["test"] * 2})
    out = run_cell(chains, split, None, _tiny_spec(tiny_model_dir))
    assert out["summary"]["reason"] == "no validation chain" and out["steps"].empty
    assert out["detection"]["reason"].str.startswith("no validation").all()


# ---------------------------------------------------------------------------------------------
# Through the DAG.


def _traces_entry(model_dir, **extra):
    entry = {
        "seed": 0,
        "supervisor": {
            "id": str(model_dir),
            "lora": {"r": 2, "alpha": 4, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
            "train": {"max_epochs": 1, "batch_size": 16},
        },
    }
    return {"traces": {**entry, **extra}}


def _check_study(study, cells):
    """Every cell wrote its tables; the split is one per benchmark, the supervisor saw train only."""
    ig = pd.read_csv(study / "infogain/traces/ig_table.csv")
    detection = pd.read_csv(study / "infogain/traces/detection_table.csv")
    assert set(detection["cell"]) == set(cells) and set(detection["method"]) == {"IG", "ORM", "MS", "LENGTH"}
    for cell in cells:
        summary = json.loads((study / f"infogain/traces/{cell}/summary.json").read_text())
        assert summary["leakage"]["ok"], summary["leakage"]
        benchmark = cell.rsplit("-", 1)[1]
        split = pd.read_csv(study / f"infogain/traces/split/{benchmark}.csv", dtype={"problem_id": str})
        steps = pd.read_csv(study / f"infogain/traces/{cell}/steps.csv", dtype={"problem_id": str})
        train = set(split.loc[split["split"] == "train", "problem_id"])
        assert set(summary.get("train_problem_ids", [])) <= train
        assert not set(steps["problem_id"]) & train
        truth = split.set_index("problem_id")["split"]
        assert (steps["split"] == truth.loc[steps["problem_id"]].to_numpy()).all()
    return ig, detection


@pytest.mark.slow
def test_infogain_rules_run_on_the_simulated_panel(tmp_path, tiny_model_dir):
    """Two simulated cells (GSM8K and MATH-500, 20 problems each) with a tiny supervisor."""
    config = {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(tmp_path / "cache"),
        "cells": ["sim-gsm8k", "sim-math500"],
        "models": {"sim": {"backend": "simulated"}},
        "benchmarks": {
            "gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 20},
            "math500": {"kind": "math500", "path": str(DATA / "math500_test.jsonl"), "limit": 20},
        },
        "infogain": _traces_entry(tiny_model_dir),
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    run_study(path, tmp_path, targets=("infogain_traces",))
    study = tmp_path / "results" / "t"
    ig, detection = _check_study(study, config["cells"])
    assert (ig["split"] == "test").all() and set(ig["subset"]) <= {"all", "correct_answer", "wrong_answer"}
    assert detection["threshold"].notna().all(), detection  # 20 problems give every split chains
    steps = pd.read_csv(study / "infogain/traces/sim-gsm8k/steps.csv")
    assert steps["ms_soft"].notna().all()  # Math-Shepherd of every step, from the drawn continuations
    report = snakemake("--report", "report.html", "infogain_traces", "--configfile", str(path), cwd=tmp_path)
    assert report.returncode == 0, report.output[-3000:]
    html = (tmp_path / "report.html").read_text()
    for caption in ("infogain_traces_ig.rst", "infogain_traces_detection.rst"):
        first_line = (ROOT / "workflow/report" / caption).read_text().splitlines()[0]
        assert first_line in html, caption  # both tables are in the report with their captions


@pytest.mark.slow
def test_infogain_rules_run_on_the_embedded_defaults_traces(tmp_path, tiny_model_dir):
    """config/config.yaml (its additions, the first 6 of them, transformers backend) with the tiny
    model as generator and supervisor, budgets cut to keep the test short (so its cell is no longer
    held to the default's plan: not confirmatory here)."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["plan"] = str(ROOT / config["plan"])
    config["cache"] = str(tmp_path / "cache")
    config["confirmatory"] = []
    for entry in config["benchmarks"].values():
        entry.update(path=str(ROOT / entry["path"]), limit=6) if "path" in entry else None
    config["models"]["smollm2"] = {"backend": "transformers", "id": str(tiny_model_dir), "device": "cpu"}
    config.setdefault("protocol", {}).update(reference_max_tokens=48, continuation_max_tokens=12)
    config["infogain"] = _traces_entry(tiny_model_dir, split=[0.34, 0.33, 0.33])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    run_study(path, tmp_path, targets=("infogain_traces",))
    _check_study(tmp_path / "results" / "default", config["cells"])


@pytest.mark.slow
def test_the_7b_supervisor_overlay_plans_the_information_gain_rules_on_the_panel():
    overlay = "config/infogain/supervisor-7b.yaml"
    result = snakemake("-n", "--forceall", "infogain_traces", "--configfile", "config/panel.yaml", overlay)
    assert result.returncode == 0, result.output[-2000:]
    assert "infogain_cell" in result.output and "infogain_tables" in result.output
    assert "reference" in result.output and "continuations" in result.output  # on the panel's own traces
    supervisor = yaml.safe_load((ROOT / overlay).read_text())["infogain"]["traces"]["supervisor"]
    assert supervisor["device"].startswith("cuda") and supervisor["dtype"] == "bfloat16"


@pytest.mark.slow
def test_a_bad_infogain_variant_is_named_with_the_file(tmp_path):
    config = {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cells": ["sim-gsm8k"],
        "models": {"sim": {"backend": "simulated"}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 5}},
        "infogain": {"traces": {"variant": "nope", "supervisor": {"id": "x"}}},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    config["infogain"]["traces"] = {"supervisor": {"id": "x", "lora": {"rank": 2}}}
    lora = tmp_path / "lora.yaml"
    lora.write_text(yaml.safe_dump(config))
    variant, rank = side_by_side(
        *(lambda p=p: snakemake("-n", "--configfile", str(p), cwd=tmp_path) for p in (path, lora))
    )
    assert (
        variant.returncode != 0 and "infogain.traces.variant 'nope'" in variant.output and str(path) in variant.output
    )
    assert rank.returncode != 0 and "rank" in rank.output, rank.output[-2000:]


def test_information_gain_tables_are_study_targets_the_manifest_and_audit_expect(tiny_model_dir):
    """Without this the manifest would hash the tables only when their rule happened to run first."""
    from cotdyn.audit.expected import expected_files
    from cotdyn.files import layout
    from cotdyn.plan.config import resolve_cells, study_protocols
    from cotdyn.plan.load import load_plan

    plain = layout.study_targets(["sim-gsm8k"], ["registered"])  # the registered study only
    with_ig = layout.study_targets(["sim-gsm8k"], ["registered"], infogain_traces=True)
    assert set(with_ig) - set(plain) == set(layout.INFOGAIN_TRACE_FILES)
    config = {
        "cells": ["sim-gsm8k"],
        "models": {"sim": {"backend": "simulated"}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 4}},
        "infogain": _traces_entry(tiny_model_dir),
    }
    plan = load_plan(ROOT / "preregistration" / "plan.yaml")
    cells = resolve_cells(config, plan)
    without_ig = {k: v for k, v in config.items() if k != "infogain"}
    protocols = study_protocols(config, plan)
    added = set(expected_files(config, plan, cells, protocols)) - set(
        expected_files(without_ig, plan, cells, protocols)
    )
    assert set(layout.INFOGAIN_TRACE_FILES) <= added, "the audit expects the traces tables a config asks for"
