"""The one records factory (cotdyn.records.factory; tests/factories.py binds it to the plan's epsilon)
holds the whole records contract, derives what a trajectory determines by the protocol's definitions,
and derives a signal declared in a test, for the tests and the calibration simulator alike."""

import math

import pytest
from factories import records_frame

from cotdyn.analysis import exploratory as ex
from cotdyn.analysis.calibration import PlantedCell, simulate_records
from cotdyn.files.columns import require_columns
from cotdyn.protocol import signals
from cotdyn.protocol.trajectory import entropy, entropy_grid, majority
from cotdyn.records.contract import RECORD_COLUMNS
from cotdyn.records.factory import fitted_answers


def test_a_frame_holds_every_contract_column_and_keeps_what_it_is_given():
    frame = records_frame(trajectory=[[1.0, 1.2, 0.0], [0.7, 0.5]], gold=["4", "5"], pred=["4", "6"], cell="x-math500")
    require_columns(frame, RECORD_COLUMNS, "factory frame")  # the check read_records makes of every file
    assert list(frame.columns[: len(RECORD_COLUMNS)]) == list(RECORD_COLUMNS)
    assert list(frame["cell"]) == ["x-math500"] * 2 and list(frame["problem_id"]) == ["p0000", "p0001"]
    # by hand: one rise of 0.2 > epsilon in the first, none in the second
    assert list(frame["n_points"]) == [3, 2] and list(frame["violations"]) == [1, 0]
    assert list(frame["monotone"]) == [False, True] and list(frame["final_entropy"]) == [0.0, 0.5]
    assert frame["coherence"].tolist() == pytest.approx([1.0, 0.2])
    assert list(frame["correct"]) == [True, False] and list(frame["chain_correct"]) == [True, False]
    assert not frame["excluded"].any() and frame["exclusion_reason"].isna().all()


def test_a_scalar_fills_every_row_and_columns_of_different_lengths_are_refused():
    frame = records_frame(3, reference_tokens=60, n_points=[2, 4, 1], excluded=[False, False, True])
    assert list(frame["reference_tokens"]) == [60] * 3 and frame["trajectory"].map(len).tolist() == [2, 4, 1]
    assert frame["exclusion_reason"].notna().tolist() == [False, False, True]
    assert math.isnan(frame["coherence"].iloc[2])
    assert len(records_frame(0)) == 0 and set(RECORD_COLUMNS) <= set(records_frame(0).columns)
    with pytest.raises(ValueError, match=r"different lengths \[2, 3\]"):
        records_frame(gold=["1", "2"], pred=["1", "2", "3"])


def _last_point(t, prefix_answers) -> float:
    """A test signal: the prefix index of the chain's last answer-bearing point."""
    return float(t.points[-1]) if t.points else float("nan")


def _modal_share_first(t, prefix_answers) -> float:
    """A test signal that reads the per-prefix answers: the first point's modal share."""
    first = [a for a in prefix_answers[t.points[0]] if a is not None] if t.points else []
    return max(first.count(a) for a in set(first)) / len(first) if first else float("nan")


def test_a_signal_declared_in_a_test_is_derived_and_reaches_the_ranking(monkeypatch):
    declared = signals.Signal("last_point", False, "-last point", "-last point", "#999933", "-", derive=_last_point)
    monkeypatch.setitem(signals.SIGNALS, "last_point", declared)
    named = ["last_point"]  # as a study's config names it
    derived = records_frame(trajectory=[[1.0, 0.5, 0.0], [0.7]], points=[[0, 2, 5], [3]], signals=named)["last_point"]
    assert list(derived) == [5.0, 3.0]  # derived per chain, from its summary
    assert list(records_frame(n_points=[4, 1], signals=named)["last_point"]) == [
        3.0,
        0.0,
    ]  # points 0..n-1 where none given
    assert "last_point" not in records_frame(n_points=[4, 1])  # a study that does not name it lacks it
    frame = records_frame(last_point=[0.0, 2.0, 1.0, 3.0], correct=[True, False, True, False])
    assert list(frame["last_point"]) == [0.0, 2.0, 1.0, 3.0]  # given: kept
    ranking = {row["signal"]: row for row in ex.ranking_table(frame, draws=5, seed=1)}
    assert ranking["last_point"]["roc_auc"] == pytest.approx(1.0)  # lower value: correct


def test_per_prefix_answers_are_given_or_fitted_to_the_trajectory(monkeypatch):
    declared = signals.Signal("modal_share", True, "share", "share", "#999933", "-", derive=_modal_share_first)
    monkeypatch.setitem(signals.SIGNALS, "modal_share", declared)
    given = [[["4", "4", "5", None, "4"], ["4"] * 5]]
    named = ["modal_share"]
    assert list(records_frame(trajectory=[[0.6, 0.0]], prefix_answers=given, signals=named)["modal_share"]) == [0.75]
    # fitted: an entropy that m = 5 answers can have is met exactly...
    levels = entropy_grid(5)
    for h in levels:
        answers = fitted_answers(h, "7")
        assert entropy([a for a in answers if a is not None]) == pytest.approx(h)
        assert majority([a for a in answers if a is not None]) == "7" and len(answers) == 5
    # ... and another entropy gets the nearest level
    assert entropy([a for a in fitted_answers(0.05, "7") if a is not None]) == 0.0
    fitted = records_frame(trajectory=[[levels[3], 0.0]], pred="7", signals=named)["modal_share"]
    answers = [a for a in fitted_answers(levels[3], "7") if a is not None]
    assert list(fitted) == [answers.count("7") / len(answers)]


def test_the_calibration_simulator_builds_its_records_with_the_same_factory(monkeypatch):
    declared = signals.Signal("last_point", False, "-last point", "-last point", "#999933", "-", derive=_last_point)
    monkeypatch.setitem(signals.SIGNALS, "last_point", declared)
    records = simulate_records(PlantedCell(40, 0.5, 0.7, 0.4, exclusion_rate=0.1), "qwen7b-gsm8k", seed=2)
    # the contract's columns, cotdyn's own signals among them; a declared signal no study names is not one
    assert list(records.columns) == [*RECORD_COLUMNS]
