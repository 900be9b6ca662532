"""One factory for the records frames tests build (the records contract: cotdyn.records.contract).

``records_frame`` returns a frame with every contract column and every declared signal's column, so a
test names only the columns it is about, and a column added to the contract or a signal declared in
``cotdyn.protocol.signals`` is filled here once instead of in each test's hand-built frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cotdyn.plan.load import load_plan
from cotdyn.protocol import signals, trajectory
from cotdyn.records.contract import RECORD_COLUMNS

# The registered epsilon, read from the plan (a registered value lives there only).
EPSILON = float(load_plan(Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml")["protocol"]["epsilon"])

# The columns a chain's trajectory determines (cotdyn.protocol.trajectory's definitions).
FROM_TRAJECTORY = {
    "n_points": len,
    "violations": lambda t: trajectory.violations(t, EPSILON),
    "monotone": lambda t: trajectory.violations(t, EPSILON) == 0,
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


def records_frame(n: int | None = None, **given) -> pd.DataFrame:
    """A records frame of ``n`` chains (or as many as the given columns hold).

    A given column (one value per chain, or a scalar for all) is kept as given; the columns a
    trajectory determines are derived from ``trajectory`` where it is given; the rest are an analysed
    chain of cell ``m-gsm8k`` whose answer is gold. Given columns are not checked against each other:
    a test that gives ``monotone`` without a trajectory gets the default trajectory beside it. Further
    columns (a study's diagnostics, ``points``, ``n_prefixes``) may be given; records may carry more
    than the contract (docs/design.md section 11). A declared signal that is derived when records are
    built, and not given, is NaN: the factory has no per-prefix answers to derive it from.
    """
    n = _length(n, given)
    frame = pd.DataFrame(index=pd.RangeIndex(n))
    for name, value in given.items():
        frame[name] = pd.Series(list(value), dtype=object) if name in ("trajectory", "points") else value

    def fill(name, values):
        if name not in frame:
            frame[name] = values

    fill("cell", "m-gsm8k")
    fill("problem_id", [f"p{i:04d}" for i in range(n)])
    if "trajectory" not in frame:
        points = frame["n_points"] if "n_points" in frame else pd.Series(2, index=frame.index)
        frame["trajectory"] = pd.Series([list(np.linspace(1.0, 0.0, int(k))) for k in points], dtype=object)
    for name, derive in FROM_TRAJECTORY.items():
        fill(name, frame["trajectory"].map(derive))
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
    for name in signals.SIGNALS:
        fill(name, float("nan"))
    added = [c for c in frame.columns if c not in RECORD_COLUMNS]
    return frame[[*RECORD_COLUMNS, *added]]
