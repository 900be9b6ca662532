"""The Python API (issue 63; cotdyn.api): a study opened from a notebook reads what the run wrote,
the audit returns what the command prints, and a what-if analysis is marked exploratory and
writes nothing into the study."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pandas as pd
import pytest

import cotdyn
from cotdyn.cli.main import main


@pytest.fixture(scope="module")
def study(small_simulated_study):
    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-2000:]
    return small_simulated_study.root / "results" / "t"


def _tree(folder) -> dict:
    return {p: os.stat(p).st_mtime_ns for p in sorted(folder.rglob("*"))}


def test_a_study_opens_with_its_plan_records_and_verdicts(study):
    opened = cotdyn.open_study(study)
    assert opened.cells == ["sim-gsm8k"] and opened.plan["plan_version"] >= 4
    assert opened.provenance["plan_sha256"] and opened.registration().startswith(f"plan {opened.plan_path} sha256 ")
    records = opened.records()
    stored = pd.read_parquet(study / "cells" / "sim-gsm8k" / "registered" / "records.parquet")
    pd.testing.assert_frame_equal(records, stored)
    verdicts = opened.verdicts()
    assert list(verdicts["id"]) == list(opened.hypotheses()["verdicts"]) and "verdict" in verdicts
    assert len(opened.records("newline")) == 60


def test_the_audit_is_the_commands_report_as_an_object(study, tmp_path):
    before = _tree(study)
    report = cotdyn.audit(study, pages=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["audit", str(study)])
    assert report.ok and rc == 0
    assert out.getvalue().splitlines()[0] == report.text().splitlines()[0]
    assert _tree(study) == before


def test_a_what_if_analysis_is_exploratory_and_writes_nothing(study):
    opened = cotdyn.open_study(study)
    before = _tree(study)
    again = cotdyn.analyze(opened.records(), opened.plan_path)
    assert again["exploratory"] is True
    assert again["verdicts"] == opened.hypotheses()["verdicts"]  # the same records and plan: the same result
    fewer = cotdyn.analyze(opened.records().head(20), opened.plan)
    assert fewer["exploratory"] is True and fewer["plan_sha256"] is None
    assert _tree(study) == before


def test_a_folder_that_is_no_study_is_named(tmp_path):
    with pytest.raises(ValueError, match="manifest"):
        cotdyn.open_study(tmp_path)


def test_the_notebook_in_docs_runs_on_a_finished_study(study, tmp_path, monkeypatch):
    """docs/study.ipynb, every code cell in order in one namespace (as a kernel runs them), with its
    STUDY pointed at the suite's small study: no cell raises, the figure is drawn, the audit passes."""
    import nbformat

    notebook = nbformat.read(Path(__file__).parents[1] / "docs" / "study.ipynb", as_version=4)
    cells = [c.source for c in notebook.cells if c.cell_type == "code"]
    assert 'STUDY = "results/default"' in cells[0]
    cells[0] = cells[0].replace('STUDY = "results/default"', f"STUDY = {str(study)!r}")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for source in cells:
        exec(compile(source, "docs/study.ipynb", "exec"), namespace)
    assert (tmp_path / "trajectories.png").stat().st_size > 1000
    assert namespace["report"].ok and namespace["what_if"]["exploratory"] is True
    assert list(namespace["verdicts"]["id"]) == list(namespace["study"].hypotheses()["verdicts"])
