"""Every registry entry, whatever package declared it (issue 50): each benchmark's local rows load and
their golds parse, and each ranking signal derives on records from the one factory
(cotdyn.records.factory) and scores them. A benchmark or signal added to the registry is tested here
without being named."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from factories import records_frame

from cotdyn.analysis.calibration import PlantedCell, simulate_records
from cotdyn.dataset.benchmarks import load_benchmark
from cotdyn.grading import registry
from cotdyn.protocol import signals

# Rows in the source's own format for the entries that declare only a hub source (no local copy is
# shipped): tests/fixtures/benchmarks/README.md.
FIXTURES = {
    "arc": "arc_challenge_test.jsonl",
    "svamp": "svamp_test.jsonl",
    "math_algebra": "hendrycks_math_algebra_test.jsonl",
}


def _local_rows(declared: registry.Benchmark) -> dict:
    if declared.generated:
        return {"kind": declared.name}
    if declared.source:
        path = Path(declared.source)
        return {"kind": declared.name, "path": str(path if path.is_absolute() else ROOT / path)}
    if declared.name in FIXTURES:
        return {
            "kind": declared.name,
            "path": str(ROOT / "tests" / "fixtures" / "benchmarks" / FIXTURES[declared.name]),
        }
    pytest.fail(f"benchmark {declared.name} ({registry.package_of(declared.name)}) has no local rows: declare a source")


@pytest.mark.parametrize("name", list(registry.REGISTRY))
def test_each_benchmarks_local_rows_load_and_their_golds_parse(name):
    declared = registry.REGISTRY[name]
    assert registry.package_of(name) != "(registered in-process, no entry point)"  # found through its entry point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unpinned copy's loud warning: tests/test_registry.py holds it
        problems = load_benchmark(_local_rows(declared))
    assert problems, f"{name}: no problems"
    assert all(p.gold for p in problems) and len({p.problem_id for p in problems}) == len(problems)
    if declared.answer == "choice":
        assert all(p.options and p.gold in "ABCDEFGHIJ"[: len(p.options)] for p in problems)


@pytest.mark.parametrize("name", list(signals.SIGNALS))
def test_each_signal_derives_on_the_one_factorys_records_and_scores_them(name):
    declared = signals.SIGNALS[name]
    assert signals.package_of(name) != "(registered in-process, no entry point)"
    # as a study that names it computes it (cotdyn's own: every study)
    trajectories = [[1.0, 0.5, 0.0], [0.0, 0.7, 0.3, 0.0], [0.6, 0.6]]
    frame = records_frame(trajectory=trajectories, pred=["1", "2", "1"], signals=[name])
    assert name in frame.columns
    values = frame[name].to_numpy(dtype=float)
    assert np.isfinite(values).all(), f"{name} did not derive on three analysed chains: {values}"
    score = declared.score(frame)
    assert score.shape == (3,) and list(score) == [v if declared.higher_is_correct else -v for v in values]
    if declared not in signals.own_signals():
        return  # the calibration simulator computes cotdyn's own signals only: no config names a plugin's
    simulated = simulate_records(PlantedCell(20, 0.5, 0.7, 0.4), "qwen7b-gsm8k", seed=1)
    analysed = simulated[~simulated["excluded"]]
    assert not analysed[name].map(lambda v: v is None or (isinstance(v, float) and math.isnan(v))).any()
