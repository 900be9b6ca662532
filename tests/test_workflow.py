"""The Snakemake DAG: it plans, it refuses bad configs with the key and file named, and it runs."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import ROOT, DATA


def snakemake(*args, cwd=ROOT):
    """Run snakemake; its messages (errors included) go to stdout, merged here with stderr."""
    result = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
                             "--workflow-profile", "none", *args],
                            cwd=cwd, capture_output=True, text=True, timeout=600)
    result.output = result.stdout + result.stderr
    return result


@pytest.mark.parametrize("config", sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "config").glob("*.yaml")))
def test_every_config_plans_a_dag(config):
    result = snakemake("-n", "--forceall", "--configfile", config)
    assert result.returncode == 0, result.output[-2000:]
    assert "reference" in result.output and "continuations" in result.output


def _write(tmp_path, config):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _simulated_config(tmp_path, **extra):
    return {"study": "t", "plan": str(ROOT / "preregistration" / "plan.yaml"), "cache": str(tmp_path / "cache"),
            "cells": ["sim-gsm8k"], "models": {"sim": {"backend": "simulated"}},
            "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 60}},
            **extra}


def test_the_workflow_passes_snakemakes_linter():
    result = snakemake("--lint")
    assert result.returncode == 0 and "Lints for" not in result.output, result.output[-3000:]


def test_a_missing_key_is_named_with_the_file(tmp_path):
    config = _simulated_config(tmp_path)
    del config["cells"]
    result = snakemake("-n", "--configfile", str(_write(tmp_path, config)))
    assert result.returncode != 0
    assert "'cells' is a required property" in result.output and "study.yaml" in result.output


def test_an_unknown_key_and_an_unknown_rule_are_named(tmp_path):
    result = snakemake("-n", "--configfile", str(_write(tmp_path, _simulated_config(tmp_path, cellz=[]))))
    assert result.returncode != 0 and "'cellz' was unexpected" in result.output
    config = _simulated_config(tmp_path, variants={"registered": {}, "para": {"segmentation": "paragraph"}})
    result = snakemake("-n", "--configfile", str(_write(tmp_path, config)))
    assert result.returncode != 0
    assert "unknown segmentation 'paragraph'" in result.output and "study.yaml" in result.output


def test_a_small_simulated_study_runs_through_the_dag(tmp_path):
    config = _simulated_config(tmp_path, variants={"registered": {}, "newline": {"segmentation": "newline"}})
    result = snakemake("--cores", "2", "--configfile", str(_write(tmp_path, config)), cwd=tmp_path)
    assert result.returncode == 0, result.output[-3000:]
    study = tmp_path / "results" / "t"
    summary = json.loads((study / "cells/sim-gsm8k/registered/summary.json").read_text())
    assert summary["n"] == 60 and summary["n_excluded"] + summary["n_analyzed"] == 60
    records = pd.read_parquet(study / "cells/sim-gsm8k/newline/records.parquet")
    assert len(records) == 60
    hypotheses = json.loads((study / "analysis/registered/hypotheses.json").read_text())
    assert "plan_sha256" in hypotheses
    assert (study / "analysis/registered/dynamics/profiles.csv").exists()
    assert (study / "manifest/manifest.json").exists()
