"""Figure 3: disagreement among entropy-profile-matched cross-model pairs (seed 002 Appendix B)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.methods.dynamics.metrics import dominant_set, entropy
from cotdyn.methods.dynamics.profiles import Trace, trace_mechanism

GRID = np.linspace(0.0, 1.0, 101)


@dataclass(frozen=True)
class NormalizedProfile:
    """A trace on the normalized-time grid: entropy, dominant set and gold dominance at each point."""

    entropy: np.ndarray
    dominant: tuple[frozenset[str], ...]
    gold_dominant: np.ndarray


def normalized_profile(trace: Trace, grid: np.ndarray = GRID) -> NormalizedProfile:
    """Rescale the trace's token positions to [0, 1] and read it on ``grid``.

    Time is (tokens - first) / (last - first) over the observed checkpoints, so every trace spans
    [0, 1]; a single-checkpoint trace is constant. Entropy is linearly interpolated; the dominant set
    and gold dominance come from the most recent observed checkpoint at or before each grid point.
    """
    if not trace.states:
        raise ValueError(f"trace {trace.cell}/{trace.problem_id} has no observed checkpoint")
    pos = np.asarray(trace.positions, dtype=float)
    span = pos[-1] - pos[0]
    t = (pos - pos[0]) / span if span > 0 else np.zeros_like(pos)
    h = np.array([entropy(s) for s in trace.states])
    last = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)
    dom = [dominant_set(s) for s in trace.states]
    return NormalizedProfile(
        entropy=np.interp(grid, t, h),
        dominant=tuple(dom[i] for i in last),
        gold_dominant=np.array([bool(trace.golds & dom[i]) for i in last]),
    )


def disagreement_pairs(trace_list: Sequence[Trace], grid: np.ndarray = GRID) -> pd.DataFrame:
    """Every cross-model pair of traces of the same (task, problem): entropy-profile RMSE and three
    disagreements (Appendix B, Figure 3).

    ``dominant_set`` and ``gold_dominance`` are the fractions of grid points where the two differ;
    ``mechanism`` is 1.0 / 0.0 when both traces have the same realized outcome and a mechanism, else
    NaN (not evaluated). Pairs are listed in (task, problem_id, model_a, model_b) order.
    """
    by_item: dict[tuple[str, str], list[Trace]] = {}
    for t in trace_list:
        if t.states:
            by_item.setdefault((t.task, t.problem_id), []).append(t)
    rows = []
    for task, pid in sorted(by_item):
        group = sorted(by_item[(task, pid)], key=lambda t: t.model)
        prof = {t.model: normalized_profile(t, grid) for t in group}
        mech = {t.model: trace_mechanism(t) for t in group}
        for a, b in combinations(group, 2):
            if a.model == b.model:
                raise ValueError(f"two traces of model {a.model!r} for task {task!r} problem {pid!r}")
            pa, pb = prof[a.model], prof[b.model]
            same_outcome = a.correct == b.correct  # both have a mechanism: their states are nonempty
            rows.append(
                {
                    "task": task,
                    "problem_id": pid,
                    "model_a": a.model,
                    "model_b": b.model,
                    "rmse": float(np.sqrt(np.mean((pa.entropy - pb.entropy) ** 2))),
                    "dominant_set": float(np.mean([x != y for x, y in zip(pa.dominant, pb.dominant)])),
                    "gold_dominance": float(np.mean(pa.gold_dominant != pb.gold_dominant)),
                    "mechanism": float(mech[a.model] != mech[b.model]) if same_outcome else math.nan,
                }
            )
    return pd.DataFrame(
        rows,
        columns=["task", "problem_id", "model_a", "model_b", "rmse", "dominant_set", "gold_dominance", "mechanism"],
    )


def disagreement_curve(
    pairs: pd.DataFrame, bin_width: float = 0.01, max_rmse: float = 0.20, exact_tol: float = 1e-12
) -> pd.DataFrame:
    """Mean disagreement (%) per entropy-profile RMSE bin (Appendix B, Figure 3).

    Exact matches (RMSE <= exact_tol) form a row at 0; the rest fall in right-closed bins
    (0, w], (w, 2w], ..., up to max_rmse; pairs above max_rmse are not shown. Every bin is listed,
    empty ones with n_pairs 0 and NaN percentages. Mechanism disagreement averages only the pairs
    where it was evaluated (``n_mechanism_pairs``).
    """
    require_columns(pairs, ("rmse", "dominant_set", "gold_dominance", "mechanism"), "pairs")
    n_bins = int(round(max_rmse / bin_width))
    edges = np.round(np.arange(n_bins + 1) * bin_width, 12)
    rmse = pairs["rmse"].to_numpy()
    exact = rmse <= exact_tol
    # right=True: edges[i-1] < x <= edges[i] -> i, so bin i-1 is (edges[i-1], edges[i]]
    index = np.digitize(rmse, edges, right=True) - 1
    groups = [("exact", 0.0, 0.0, exact)]
    groups += [(f"bin{i:02d}", edges[i], edges[i + 1], ~exact & (index == i)) for i in range(n_bins)]
    rows = []
    for name, lo, hi, mask in groups:
        sub = pairs[mask]
        mech = sub["mechanism"].dropna()
        rows.append(
            {
                "bin": name,
                "rmse_lo": float(lo),
                "rmse_hi": float(hi),
                "rmse_mid": float((lo + hi) / 2),
                "n_pairs": len(sub),
                "dominant_set_pct": 100 * float(sub["dominant_set"].mean()) if len(sub) else math.nan,
                "gold_dominance_pct": 100 * float(sub["gold_dominance"].mean()) if len(sub) else math.nan,
                "n_mechanism_pairs": len(mech),
                "mechanism_pct": 100 * float(mech.mean()) if len(mech) else math.nan,
            }
        )
    return pd.DataFrame(rows)
