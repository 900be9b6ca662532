"""The one factory of records frames that are not built from a study: the tests' and the calibration
simulator's (``cotdyn.analysis.calibration.simulate_records``).

``records_frame`` returns a frame with every records-contract column (``cotdyn.records.contract``) and
the column of each signal a study would compute (cotdyn's own, and the plugin signals it names:
``cotdyn.protocol.signals.study_signals``), so a caller names only the columns it is about, and a
contract column or a signal is filled here once. What a chain's trajectory
determines is derived by the protocol's definitions (``cotdyn.protocol.trajectory``); a signal with a
``derive`` is derived as ``records_table`` derives it, from the chain's summary and its per-prefix
answers (``prefix_answers`` where given, else answers made to fit the trajectory: ``fitted_answers``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np
import pandas as pd

from cotdyn.protocol import trajectory
from cotdyn.protocol.signals import Signal, study_signals
from cotdyn.protocol.trajectory import Trajectory
from cotdyn.records.contract import RECORD_COLUMNS

# The answers of a fitted prefix: m = 5, the registered sample count of seed 003 (its 13 entropies,
# ``trajectory.entropy_grid(5)``, are the levels the calibration simulator draws).
FITTED_SAMPLES = 5
# Columns that hold one list per chain.
LIST_COLUMNS = ("trajectory", "points", "prefix_answers")


def _from_trajectory(epsilon: float | None) -> dict:
    """The columns a chain's trajectory determines; violations and monotone need epsilon."""

    def needs_epsilon(_):
        raise ValueError("records_frame: give epsilon (the plan's) to derive violations and monotone from trajectories")

    violations = needs_epsilon if epsilon is None else (lambda t: trajectory.violations(t, epsilon))
    return {
        "n_points": len,
        "violations": violations,
        "monotone": lambda t: violations(t) == 0,
        "coherence": lambda t: trajectory.coherence(t) if len(t) >= 2 else float("nan"),
        "final_entropy": lambda t: t[-1] if len(t) else float("nan"),
    }


def _length(n: int | None, given: dict) -> int:
    lengths = {
        len(v) for v in given.values() if isinstance(v, (Sequence, np.ndarray, pd.Series)) and not isinstance(v, str)
    }
    if n is not None:
        lengths.add(n)
    if len(lengths) > 1:
        raise ValueError(f"records_frame: columns of different lengths {sorted(lengths)}")
    return lengths.pop() if lengths else 1


@cache
def _partitions(m: int) -> tuple[tuple[float, tuple[int, ...]], ...]:
    """(entropy, class sizes) of every way m' <= m answers split into classes (the rest unparsed)."""
    found = {}

    def split(n: int, largest: int):
        if n == 0:
            yield ()
            return
        for part in range(min(n, largest), 0, -1):
            for rest in split(n - part, part):
                yield (part, *rest)

    for n in range(1, m + 1):
        for parts in split(n, n):
            h = round(-sum(p / n * math.log(p / n) for p in parts), 12) + 0.0
            found.setdefault(h, parts)
    return tuple(sorted(found.items()))


def fitted_answers(entropy: float, label: str | None, m: int = FITTED_SAMPLES) -> list[str | None]:
    """m answers whose entropy is the level of m answers nearest ``entropy`` (equal where it is one):
    the largest class is ``label`` (``"a"`` where none), the others distinct fillers, then nulls."""
    _, parts = min(_partitions(m), key=lambda item: abs(item[0] - entropy))
    classes = [label if label is not None else "a", *(f"other-{i}" for i in range(1, len(parts)))]
    answers = [c for c, size in zip(classes, parts) for _ in range(size)]
    return answers + [None] * (m - len(answers))


def _prefix_answers(row) -> list[list[str | None]]:
    """The chain's per-prefix answers: given, or fitted to its trajectory at its points (the prefixes
    between points hold no answer); every fitted point's modal class is the chain's label."""
    if isinstance(row.get("prefix_answers"), (list, tuple)):
        return [list(a) for a in row["prefix_answers"]]
    entropies = list(row["trajectory"])
    points = list(row["points"]) if isinstance(row.get("points"), (list, tuple)) else list(range(len(entropies)))
    label = row["pred"] if isinstance(row["pred"], str) else None
    answers: list[list[str | None]] = [[None] * FITTED_SAMPLES for _ in range(max(points, default=-1) + 1)]
    for k, h in zip(points, entropies):
        answers[k] = fitted_answers(h, label)
    return answers


def _summary(row) -> Trajectory:
    """The chain's summary as ``cotdyn.protocol.trajectory.summarize`` gives it, from its columns."""

    def value(name):
        v = row[name]
        return None if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v

    entropies = list(row["trajectory"])
    points = list(row["points"]) if isinstance(row.get("points"), (list, tuple)) else list(range(len(entropies)))
    return Trajectory(
        entropies,
        points,
        *(value(name) for name in ("monotone", "violations", "coherence", "final_entropy", "final_confidence")),
        value("pred"),
        bool(row["excluded"]),
        value("exclusion_reason"),
    )


def _derived(frame: pd.DataFrame, signal: Signal) -> list:
    rows = frame.to_dict("records")
    return [signal.derive(_summary(row), _prefix_answers(row)) for row in rows]


def records_frame(
    n: int | None = None, *, epsilon: float | None = None, signals: Sequence[str] = (), **given
) -> pd.DataFrame:
    """A records frame of ``n`` chains (or as many as the given columns hold).

    A given column (one value per chain, or a scalar for all) is kept as given; the columns a
    trajectory determines are derived from ``trajectory`` where it is given (``violations`` and
    ``monotone`` by ``epsilon``, which a caller that derives them must give: it is a registered value,
    read from a plan); the rest are an analysed chain of cell ``m-gsm8k`` whose answer is gold. Given
    columns are not checked against each other: a test that gives ``monotone`` without a trajectory
    gets the default trajectory beside it. Further columns (a study's diagnostics, ``points``,
    ``prefix_answers``) may be given; records may carry more than the contract (docs/reference.md
    section 11). Each of the study's signals (cotdyn's own and the plugin ``signals`` named, as a
    config names them) with a ``derive`` that is not given is derived per chain.
    """
    n = _length(n, given)
    frame = pd.DataFrame(index=pd.RangeIndex(n))
    for name, value in given.items():
        frame[name] = pd.Series(list(value), dtype=object) if name in LIST_COLUMNS else value

    def fill(name, values):
        if name not in frame:
            frame[name] = values

    fill("cell", "m-gsm8k")
    fill("problem_id", [f"p{i:04d}" for i in range(n)])
    if "trajectory" not in frame:
        points = frame["n_points"] if "n_points" in frame else pd.Series(2, index=frame.index)
        frame["trajectory"] = pd.Series([list(np.linspace(1.0, 0.0, int(k))) for k in points], dtype=object)
    for name, derive in _from_trajectory(epsilon).items():
        if name not in frame:  # derived only where not given (a caller that gives both needs no epsilon)
            frame[name] = frame["trajectory"].map(derive)
    fill("final_confidence", 1.0)
    fill("gold", "1")
    fill("pred", frame["gold"])
    fill("correct", frame["pred"].eq(frame["gold"]) & frame["pred"].notna())
    fill("chain_answer", frame["pred"])
    fill("chain_correct", frame["correct"])
    fill("excluded", False)
    fill("exclusion_reason", frame["excluded"].map(lambda out: "excluded by the test" if out else None))
    fill("reference_tokens", 100)
    fill("reference_truncated", False)
    fill("raw_units", frame["n_points"] - 1)
    fill("cap_hit", False)
    for signal in study_signals(signals):
        if signal.name not in frame:
            frame[signal.name] = _derived(frame, signal) if signal.derive is not None and n else float("nan")
    added = [c for c in frame.columns if c not in RECORD_COLUMNS]
    return frame[[*RECORD_COLUMNS, *added]]
