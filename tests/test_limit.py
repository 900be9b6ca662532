"""``limit:`` (issue 53 item 6): the first N problems of each benchmark for a quick look; a limited
study is descriptive, never confirmatory, and its plan check, verdicts, report header and audit
say so (cotdyn.plan.config.study_limit, cotdyn.analysis.hypotheses.limited)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from inprocess import ROOT, run_study

from cotdyn.analysis.hypotheses.limited import descriptive_only
from cotdyn.audit.check import audit
from cotdyn.generation.backends.validation import validate_config
from cotdyn.plan.config import ConfigError, confirmatory_cells, limited_scope, resolve_cells

CELL = "qwen7b-gsm8k"  # a registered cell of the plan, on the simulated backend


def config(root: Path, **extra) -> dict:
    return {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(root / "cache"),
        "cells": [CELL, "qwen7b-math500"],
        "confirmatory": [CELL],
        "models": {"qwen7b": {"backend": "simulated"}},
        "benchmarks": {
            "gsm8k": {"kind": "gsm8k", "path": str(ROOT / "data" / "gsm8k_test.jsonl")},
            "math500": {"kind": "math500", "path": str(ROOT / "data" / "math500_test.jsonl"), "limit": 4},
        },
        **extra,
    }


def test_the_schema_takes_a_positive_integer_and_names_the_field(tmp_path):
    assert validate_config(config(tmp_path, limit=5), "study.yaml")["limit"] == 5
    for bad in (0, -3, "five", 2.5):
        with pytest.raises(ConfigError, match="limit") as e:
            validate_config(config(tmp_path, limit=bad), "study.yaml")
        assert "study.yaml" in str(e.value) and "\n" not in str(e.value)


def test_limit_takes_the_first_n_of_each_benchmark_and_no_cell_is_confirmatory(tmp_path, plan):
    cells = resolve_cells(config(tmp_path, limit=6), plan)
    assert cells[CELL].benchmark["limit"] == 6
    assert cells["qwen7b-math500"].benchmark["limit"] == 4  # the benchmark's own, smaller limit stands
    assert confirmatory_cells(config(tmp_path, limit=6)) == []
    assert confirmatory_cells(config(tmp_path)) == [CELL]
    assert "limit" not in resolve_cells(config(tmp_path), plan)[CELL].benchmark


def test_every_deciding_verdict_reads_descriptive_and_keeps_its_reading():
    result = {
        "verdicts": {
            "H1": {
                "verdict": "supported",
                "cells": {CELL: {"verdict": "supported"}, "x": {"verdict": "not_estimable"}},
            },
            "H4": {"verdict": "not_estimable", "cells": {}},
        }
    }
    out = descriptive_only(result, 5, limited_scope(5))
    h1 = out["verdicts"]["H1"]
    assert h1["verdict"] == "descriptive" and h1["reading_on_the_subset"] == "supported"
    assert h1["cells"][CELL] == {"verdict": "descriptive", "reading_on_the_subset": "supported"}
    assert h1["cells"]["x"] == {"verdict": "not_estimable"}  # it decides nothing either way
    assert out["verdicts"]["H4"]["verdict"] == "not_estimable"
    assert out["scope"]["limit"] == 5 and "first 5 problems" in h1["scope"]


@pytest.fixture(scope="module")
def limited_study(tmp_path_factory) -> Path:
    """A two-cell study with a confirmatory cell, limited to 30 problems, through every rule in process."""
    root = tmp_path_factory.mktemp("limited")
    (root / "study.yaml").write_text(yaml.safe_dump(config(root, limit=30, extras=[])))
    run_study(root / "study.yaml", root)
    return root / "results" / "t"


def test_a_limited_study_runs_n_problems_and_says_it_is_descriptive_everywhere(limited_study):
    assert len(pd.read_parquet(limited_study / "problems/gsm8k.parquet")) == 30
    assert len(pd.read_parquet(limited_study / "problems/math500.parquet")) == 4
    check = json.loads((limited_study / "checks/plan_check.json").read_text())
    assert check["limit"]["problems"] == 30 and check["cells"][CELL]["confirmatory"] is False
    hypotheses = json.loads((limited_study / "analysis/registered/hypotheses.json").read_text())
    verdicts = hypotheses["verdicts"]
    assert all(v["verdict"] in ("descriptive", "not_estimable") for v in verdicts.values()), verdicts
    blocks = [b for v in verdicts.values() for b in (v.get("cells") or {}).values()]
    assert all(b["verdict"] in ("descriptive", "not_estimable") for b in blocks)
    read = [b["reading_on_the_subset"] for b in blocks if b["verdict"] == "descriptive"]
    assert read and set(read) <= {"supported", "not_supported", "estimated", "imprecise"}, blocks
    assert all("first 30 problems" in v["scope"] for v in verdicts.values())
    table = pd.read_csv(limited_study / "analysis/registered/verdicts_table.csv")
    assert set(table["verdict"]) <= {"descriptive", "not_estimable"} and "descriptive" in set(table["verdict"])
    header = (limited_study / "report/registered/header.html").read_text()
    assert "Descriptive study" in header and "first 30 problems" in header
    results = (limited_study / "report/registered/registered_results.html").read_text()
    assert "descriptive" in results


def test_the_audit_rederives_the_descriptive_reading_and_says_so(limited_study):
    report = audit(limited_study)
    assert report.ok, report.text()
    assert report.as_dict()["scope"] == limited_scope(30)
    assert limited_scope(30) in report.text().splitlines()[2]
    stored = json.loads((limited_study / "report/audit.json").read_text())
    assert stored["ok"] is True and stored["scope"] == limited_scope(30)
