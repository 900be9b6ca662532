"""Descriptive companions of the registered hypotheses: reported beside them, deciding nothing.

``h2_against_shape``: seed 003 section 3.4 states H2 as "absolute Spearman rho below 0.10, and
substantially smaller than the shape effect"; the registered criterion (plan ``hypotheses``, H2) is
the CI clause alone. The second clause is reported here, in one unit: the shape effect as Spearman
rho of the monotone flag with correctness (for two binary variables, the phi coefficient), and the
difference |rho_shape| - |rho_coherence|, each with its percentile CI over the cell's one resample
matrix (paired with H1-H5). "Substantially" is not quantified by the seed; no verdict is drawn.
"""

from __future__ import annotations

import numpy as np

from cotdyn import stats
from cotdyn.analysis.hypotheses.inputs import CellData, Settings
from cotdyn.stats import finite_or_none

NOTE = (
    "descriptive: seed 003 section 3.4's 'substantially smaller than the shape effect', as "
    "|rho_shape| - |rho_coherence| over the same resamples; the registered H2 criterion is the CI alone"
)


def h2_against_shape(d: CellData, idx: np.ndarray | None, s: Settings, h2: dict) -> dict:
    """The shape effect as Spearman rho(monotone, correct) and |rho_shape| - |rho_coherence|, with
    CIs; null with the reason where H2's rho is (its reason) or the monotone flag is constant."""
    block = {"rho_shape": None, "rho_shape_ci": [None, None], "abs_difference": None,
             "abs_difference_ci": [None, None], "ci_n_kept": 0, "note": NOTE, "reason": None}  # fmt: skip
    if h2.get("rho") is None:
        return block | {"reason": f"H2's rho is undefined: {h2.get('reason')}"}
    flag = d.monotone.astype(float)
    if flag.min() == flag.max():
        return block | {"reason": "the monotone flag is constant over the usable problems"}
    rho_shape = stats.spearman_binary(flag, d.correct)
    rows = stats.cell_resamples(s.seed, d.cell, d.n, s.resamples) if idx is None else idx
    shape_rows = stats.spearman_binary_rows(flag, d.correct, rows)
    coherence_rows = stats.spearman_binary_rows(d.coherence, d.correct, rows)
    shape_ci = stats.percentile_interval(shape_rows, s.level, s.quantile_rule)
    diff_ci = stats.percentile_interval(np.abs(shape_rows) - np.abs(coherence_rows), s.level, s.quantile_rule)
    return block | {
        "rho_shape": finite_or_none(rho_shape),
        "rho_shape_ci": shape_ci.as_list(),
        "abs_difference": finite_or_none(abs(rho_shape) - abs(h2["rho"])),
        "abs_difference_ci": diff_ci.as_list(),
        "ci_n_kept": diff_ci.n_kept,
    }
