"""The fast end-to-end path: a one-cell simulated study through every rule's script in this process
(tests/inprocess.py), so "does my column reach the page" is answered without a Snakemake run. A signal
declared in the test (as tests/test_signals.py declares it) is followed from the rule scripts into the
records, the exploratory ranking and its page, and kept out of the registered secondary analysis; the
run's own audit passes."""

import json

import pandas as pd
import yaml
from inprocess import ROOT, run_study
from test_signals import _settle_step

from cotdyn.protocol import signals
from cotdyn.report.exploratory_tables import TABLES_HTML

# Every stage of a one-cell study: generation, records, the registered and exploratory analyses, the
# seed 002 and 000 methods that run on it, grading, manifests, the audit and the report pages.
STAGES = {
    "check_plan", "problems", "reference", "continuations", "records", "hypotheses", "exploratory", "sweeps",
    "secondary", "generations", "dynamics", "math_shepherd", "grading", "grading_page", "cell_manifest",
    "manifest", "audit_result", "report_header", "registered_results",
}  # fmt: skip
SWITCHES = {"accuracy_monotone": 0.6, "accuracy_nonmonotone": 0.4, "late_switch_share": 1.0}


def test_a_declared_signal_reaches_records_ranking_and_page_through_every_rule_in_process(tmp_path, monkeypatch):
    declared = signals.Signal("settle_step", False, "-settle step", "-settle step", "#999933", "-", derive=_settle_step)
    monkeypatch.setitem(signals.SIGNALS, "settle_step", declared)
    config = {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(tmp_path / "cache"),
        "cells": ["sim-gsm8k"],
        # every incorrect chain's dominant answer is gold until 70% of it, then switches away (the
        # simulator plants no switch by default): a trajectory signal has something to find
        "models": {"sim": {"backend": "simulated", "planted": SWITCHES}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(ROOT / "data" / "gsm8k_test.jsonl"), "limit": 30}},
        "signals": ["settle_step"],  # a study computes the plugin signals its config names
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    seconds = run_study(tmp_path / "study.yaml", tmp_path)
    assert STAGES <= set(seconds), sorted(STAGES - set(seconds))

    study = tmp_path / "results" / "t"
    records = pd.read_parquet(study / "cells/sim-gsm8k/registered/records.parquet")
    kept = records[~records["excluded"]]
    assert len(records) == 30 and len(kept) > 0 and kept["settle_step"].notna().all()
    exploratory = study / "analysis/registered/exploratory"
    ranking = pd.read_csv(exploratory / "ranking.csv").query("label == 'correct'").set_index("signal")
    # the planted late switches settle incorrect chains late: the signal ranks correct chains first
    # (without them its ROC area is 0.45 on these problems, in process through tests/test_pipeline.run_cell)
    assert ranking.loc["settle_step", "roc_auc"] > 0.8, ranking["roc_auc"]
    assert "settle_step" in (exploratory / TABLES_HTML).read_text()
    selective = pd.read_csv(study / "analysis/registered/secondary/selective_accuracy.csv")
    assert "settle_step" not in set(selective["signal"])  # a registered analysis reads what the plan names
    audit = json.loads((study / "report/audit.json").read_text())
    assert audit["ok"] is True and audit["counts"]["mismatch"] == 0, audit["problems"]
    assert (study / "report/registered/registered_results.html").exists()
