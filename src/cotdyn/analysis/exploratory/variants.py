"""Trajectory-derived variants: early exit and the epsilon sweep (seed 003 sections 6.1, 8)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from cotdyn import stats
from cotdyn.analysis.exploratory.inputs import _labels, analyzed
from cotdyn.protocol.trajectory import entropy_grid, violations

EPSILONS = (0.0, 0.01, 0.05, 0.10)


def shape_at(
    trajectories: Sequence[Sequence[float]], epsilon: float, transitions: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(monotone, violations) recomputed from stored trajectories at ``epsilon``, over the first
    ``transitions`` steps only when given (a chain with fewer steps keeps all of them)."""
    viol = [
        violations([float(h) for h in t][: None if transitions is None else transitions + 1], epsilon)
        for t in trajectories
    ]
    return np.array(viol, dtype=np.int64) == 0, np.array(viol, dtype=np.int64)


def _gap_block(flag: np.ndarray, y: np.ndarray, idx: np.ndarray | None, level: float) -> dict:
    """The gap and its CI over the cell's resample matrix ``idx`` (None: no CI)."""
    n = flag.size
    point = stats.accuracy_gap_rows(flag, y, stats.full_sample(n))[0] if n else np.nan
    resamples = 0 if idx is None else int(idx.shape[0])
    ci = (
        stats.percentile_interval(stats.accuracy_gap_rows(flag, y, idx), level)
        if n and resamples
        else stats.Interval(None, None, 0, resamples)
    )
    pp = lambda v: None if v is None or not np.isfinite(v) else float(100 * v)  # noqa: E731
    return {
        "coverage": float(flag.mean()) if n else None,
        "gap_pp": pp(point),
        "ci_lo": pp(ci.lo),
        "ci_hi": pp(ci.hi),
        "ci_n_kept": ci.n_kept,
    }


def early_exit(
    records: pd.DataFrame,
    epsilon: float,
    idx: np.ndarray | None,
    level: float = 0.95,
    max_transitions: int | None = None,
) -> list[dict]:
    """The monotonicity gap computed from the first k transitions only, k = 1, 2, ... (seed 003
    section 6.1): how early in the chain the shape signal is available. The label is the final one;
    a chain with fewer than k transitions contributes its whole trajectory (it has already ended).
    Every k reads the same resample matrix ``idx`` (``stats.cell_resamples``), so rows are paired."""
    rows = analyzed(records)
    y = _labels(rows["correct"])
    lengths = rows["n_points"].to_numpy(dtype=int) - 1
    k_max = int(lengths.max()) if len(rows) else 0
    if max_transitions is not None:
        k_max = min(k_max, max_transitions)
    out = []
    for k in range(1, k_max + 1):
        flag, _ = shape_at(rows["trajectory"], epsilon, k)
        out.append(
            {"transitions": k, "n": int(len(rows)), "n_reaching_k": int((lengths >= k).sum())}
            | _gap_block(flag, y, idx, level)
        )
    return out


def min_grid_spacing(m: int) -> float:
    """Smallest positive gap between two entropies m' <= m answers can take (seed 003 section 8):
    epsilons below it cannot change a monotonicity verdict."""
    grid = np.array(entropy_grid(m))
    return float(np.diff(grid).min())


def epsilon_sweep(
    records: pd.DataFrame,
    m: int,
    idx: np.ndarray | None,
    level: float = 0.95,
    epsilons: Sequence[float] = EPSILONS,
) -> list[dict]:
    """Monotone coverage, violations and the gap with epsilon recomputed from the stored
    trajectory, for each epsilon; the entropy grid's minimum spacing at m is reported beside them.
    Every epsilon reads the same resample matrix ``idx``, so two epsilons that give the same flags
    give the same CI."""
    rows = analyzed(records)
    y = _labels(rows["correct"])
    spacing = min_grid_spacing(m)
    base, _ = shape_at(rows["trajectory"], min(epsilons))
    out = []
    for eps in epsilons:
        flag, viol = shape_at(rows["trajectory"], eps)
        out.append(
            {
                "epsilon": float(eps),
                "m": int(m),
                "min_grid_spacing": spacing,
                "below_spacing": bool(eps < spacing),
                "n": int(len(rows)),
                "mean_violations": float(viol.mean()) if len(rows) else None,
                "n_changed_vs_min_epsilon": int((flag != base).sum()),
            }
            | _gap_block(flag, y, idx, level)
        )
    return out
