"""Reference-budget coverage curves (seed 003 section 5.1, Figure 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class CoverageCurve:
    """Fraction of chains completing within each observed length, censoring kept apart.

    ``lengths``/``completed`` are the observation points only: a chain that hit the budget
    (right-censored) never appears there, so the curve is never carried to 100% by chains whose
    completion was not observed. ``end_censored`` says whether the curve stops at the budget with
    censored chains outstanding (drawn hollow) rather than at a real maximum (drawn filled).
    """

    lengths: np.ndarray
    completed: np.ndarray
    n: int
    n_censored: int
    cap: int | None
    end_censored: bool

    def at(self, budget: float) -> float:
        """Completion fraction within ``budget`` (0 before the first observation)."""
        i = np.searchsorted(self.lengths, budget, side="right")
        return float(self.completed[i - 1]) if i else 0.0


def coverage_curve(lengths: Sequence[int], truncated: Sequence[bool]) -> CoverageCurve:
    """Product-limit (Kaplan-Meier) completion 1 - S(b) at each observed chain length.

    A truncated chain counts in the risk set up to its length and never as a completion. With a
    single budget every censored chain sits at the cap, and this reduces to (completed chains of
    length <= b) / n for every b below the cap.
    """
    t = np.asarray(lengths, dtype=float)
    c = np.asarray(truncated, dtype=bool)
    if t.shape != c.shape:
        raise ValueError("coverage_curve: lengths and truncated differ in length")
    if t.size == 0:
        raise ValueError("coverage_curve: no chains")
    observed = np.unique(t[~c])
    survival, completed = 1.0, []
    for length in observed:
        at_risk = int((t >= length).sum())
        events = int(((t == length) & ~c).sum())
        survival *= 1.0 - events / at_risk
        completed.append(1.0 - survival)
    return CoverageCurve(
        observed.astype(int),
        np.array(completed, dtype=float),
        int(t.size),
        int(c.sum()),
        int(t[c].max()) if c.any() else None,
        bool(c.any()),
    )


def coverage_rows(cell: str, curve: CoverageCurve) -> list[dict]:
    rows = [
        {"cell": cell, "length": int(x), "completed": float(f), "kind": "observed"}
        for x, f in zip(curve.lengths, curve.completed)
    ]
    if curve.cap is not None:
        last = float(curve.completed[-1]) if curve.completed.size else 0.0
        rows.append(
            {
                "cell": cell,
                "length": curve.cap,
                "completed": last,
                "kind": "censored_end",
                "n_censored": curve.n_censored,
            }
        )
    return rows
