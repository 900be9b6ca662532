"""The tests' one records factory (tests/factories.py) holds the whole records contract, derives what a
trajectory determines by the protocol's definitions, and follows a signal declared in a test."""

import math

import pytest
from factories import records_frame

from cotdyn.analysis import exploratory as ex
from cotdyn.files.columns import require_columns
from cotdyn.protocol import signals
from cotdyn.records.contract import RECORD_COLUMNS


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


def test_a_signal_declared_in_a_test_gets_its_column_and_reaches_the_ranking(monkeypatch):
    declared = signals.Signal("settle_step", False, "-settle step", "-settle step", "#999933", "-", derive=len)
    monkeypatch.setitem(signals.SIGNALS, "settle_step", declared)
    assert records_frame(2)["settle_step"].isna().all()  # no per-prefix answers to derive it from
    frame = records_frame(settle_step=[0.0, 2.0, 1.0, 3.0], correct=[True, False, True, False])
    ranking = {row["signal"]: row for row in ex.ranking_table(frame, draws=5, seed=1)}
    assert ranking["settle_step"]["roc_auc"] == pytest.approx(1.0)  # lower settle step: correct
