"""The Snakemake DAG: it plans, it refuses bad configs with the key and file named, and it runs."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest
import yaml
from conftest import DATA, ROOT


def snakemake(*args, cwd=ROOT):
    """Run snakemake; its messages (errors included) go to stdout, merged here with stderr."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--workflow-profile",
            "none",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result.output = result.stdout + result.stderr
    return result


def side_by_side(*calls):
    """Independent snakemake calls, two at a time, and their results in order: each is one mostly
    single-threaded interpreter, so on the suite's 2 cores two run in the time of one."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda call: call(), calls))


CONFIGS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "config").glob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_every_config_plans_a_dag(config):
    from inprocess import planned_rules

    assert {"reference", "continuations"} <= planned_rules(ROOT / config)


def _write(tmp_path, config):
    path = tmp_path / "study.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def _simulated_config(tmp_path, **extra):
    return {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(tmp_path / "cache"),
        "cells": ["sim-gsm8k"],
        "models": {"sim": {"backend": "simulated"}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 60}},
        **extra,
    }


@pytest.mark.slow
def test_the_workflow_passes_snakemakes_linter():
    result = snakemake("--lint")
    assert result.returncode == 0 and "Lints for" not in result.output, result.output[-3000:]


@pytest.mark.slow
def test_a_missing_key_is_named_with_the_file(tmp_path):
    config = _simulated_config(tmp_path)
    del config["cells"]
    result = snakemake("-n", "--configfile", str(_write(tmp_path, config)))
    assert result.returncode != 0
    assert "'cells' is a required property" in result.output and "study.yaml" in result.output


@pytest.mark.slow
def test_an_unknown_key_and_an_unknown_rule_are_named(tmp_path):
    bad_rule = _simulated_config(tmp_path, variants={"registered": {}, "para": {"segmentation": "paragraph"}})
    paths = [_write(tmp_path / "key", _simulated_config(tmp_path, cellz=[])), _write(tmp_path / "rule", bad_rule)]
    key, rule = side_by_side(*(lambda p=p: snakemake("-n", "--configfile", str(p)) for p in paths))
    assert key.returncode != 0 and "'cellz' was unexpected" in key.output
    assert rule.returncode != 0
    assert "unknown segmentation 'paragraph'" in rule.output and "study.yaml" in rule.output


def small_study_config(tmp_path):
    """Three variants of one cell with a model that misbehaves; conftest's small_simulated_study
    runs it once for this module and test_report_pages."""
    variants = {"registered": {}, "newline": {"segmentation": "newline"}, "seed-1": {"seed": 1}}
    config = _simulated_config(tmp_path, variants=variants)
    # a model that misbehaves as real ones do (cotdyn.generation.backends.simulated), more often than they do
    config["models"]["sim"]["planted"] = {
        "unanswered_rate": 0.2,
        "cut_rate": 0.1,
        "empty_rate": 0.05,
        "conflicting_rate": 0.1,
        "boxed_rate": 0.1,
        "latex_rate": 0.2,
        "non_ascii_rate": 0.1,
    }
    return config


def test_a_small_simulated_study_runs_through_the_dag(small_simulated_study):
    result = small_simulated_study.run
    assert result.returncode == 0, result.output[-3000:]
    study = small_simulated_study.root / "results" / "t"
    summary = json.loads((study / "cells/sim-gsm8k/registered/summary.json").read_text())
    assert summary["n"] == 60 and summary["n_excluded"] + summary["n_analyzed"] == 60
    records = pd.read_parquet(study / "cells/sim-gsm8k/newline/records.parquet")
    assert len(records) == 60
    unanswered = records.chain_answer.isna()
    assert unanswered.any() and not records.chain_correct[unanswered].any()
    hypotheses = json.loads((study / "analysis/registered/hypotheses.json").read_text())
    assert "plan_sha256" in hypotheses
    assert (study / "analysis/registered/dynamics/profiles.csv").exists()
    assert (study / "manifest/manifest.json").exists()
    selective = pd.read_csv(study / "analysis/newline/secondary/selective_accuracy.csv")
    assert (selective["coverage"] == 0.737).all() and selective["selective_accuracy"].notna().all()
    agreement = pd.read_csv(study / "analysis/generations/generation_agreement.csv")
    assert set(agreement["variant_b"]) == {"seed-1"} and len(agreement) == 4


@pytest.mark.slow
def test_a_study_whose_every_chain_is_excluded_runs_to_the_end(tmp_path):
    """Every continuation empty: no prefix bears an answer, every chain is excluded, and every rule
    still finishes (in this process, tests/inprocess.py), its outputs saying why nothing was
    estimated; the audit passes, in process and as the rule `snakemake audit` runs it."""
    from inprocess import run_study

    from cotdyn.audit.check import audit

    config = _simulated_config(tmp_path)
    config["benchmarks"]["gsm8k"]["limit"] = 12
    config["models"]["sim"]["planted"] = {"empty_rate": 1.0}
    path = _write(tmp_path, config)
    run_study(path, tmp_path)
    study = tmp_path / "results" / "t"
    records = pd.read_parquet(study / "cells/sim-gsm8k/registered/records.parquet")
    assert len(records) == 12 and records["excluded"].all()
    cell = json.loads((study / "analysis/registered/hypotheses.json").read_text())["cells"]["sim-gsm8k"]
    assert cell["role"] == "descriptive" and cell["H1"]["gap_pp"] is None
    assert cell["H1"]["reason"] == "no usable problems (12 of 12 excluded)"
    early_exit = pd.read_csv(study / "analysis/registered/exploratory/early_exit.csv")
    assert early_exit["reason"].tolist() == ["no analyzed chains (12 of 12 excluded)"]
    selective = pd.read_csv(study / "analysis/registered/secondary/selective_accuracy.csv")
    assert selective["selective_accuracy"].isna().all() and selective["reason"].notna().all()
    for figure in ("exploratory/example_trajectories.png", "dynamics/trajectories.png", "forest_gaps.png"):
        assert (study / "analysis/registered" / figure).stat().st_size > 0
    audited = audit(study, config["plan"], cache=config["cache"])
    assert audited.ok, audited.text()
    # the reviewer's `snakemake audit` (workflow/rules/audit.smk), the rule's own run
    rule = snakemake("audit", "--cores", "1", "--configfile", str(path), cwd=tmp_path)
    assert rule.returncode == 0, rule.output[-3000:]
    assert json.loads((study / "logs/audit/audit.json").read_text())["ok"] is True


@pytest.mark.slow
def test_plan_version_1_stays_runnable_through_the_dag(tmp_path):
    """The plan is a config key: ``--config plan=preregistration/v1/plan.yaml`` runs the study under
    the first registration (its own REGISTERED beside it), with version 1's verdict semantics."""
    from cotdyn.plan.load import plan_sha256

    v1 = ROOT / "preregistration" / "v1" / "plan.yaml"
    config = _simulated_config(tmp_path)
    config["benchmarks"]["gsm8k"]["limit"] = 12
    targets = ["results/t/analysis/registered/hypotheses.json", "results/t/checks/plan_check.json"]
    # targets first: --configfile and --config each take every word after them
    result = snakemake(
        *targets, "--cores", "2", "--configfile", str(_write(tmp_path, config)), "--config", f"plan={v1}", cwd=tmp_path
    )
    assert result.returncode == 0, result.output[-3000:]
    study = tmp_path / "results" / "t"
    hypotheses = json.loads((study / "analysis/registered/hypotheses.json").read_text())
    assert hypotheses["plan_sha256"] == plan_sha256(v1)
    assert "H1-replication" not in hypotheses["verdicts"]  # a version 2 hypothesis
    assert hypotheses["settings"]["verdict_rule"]["supported_requires"] == ["ci_criterion"]
    check = json.loads((study / "checks/plan_check.json").read_text())
    assert check["plan_sha256"] == plan_sha256(v1) and check["registered"]["date"] == "2026-11-30"
