"""Ranking signals: ROC area and risk-coverage area (seed 003 Appendix F.1, F.2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from cotdyn.analysis.exploratory.inputs import _labels, analyzed
from cotdyn.protocol.signals import in_records

# The original's operating point: selective accuracy at 73.7% coverage (seed 003 Appendix F.2).
TRUNCATED_COVERAGE = 0.737


# ---------------------------------------------------------------------------------------------
# Ranking signals: ROC area and risk-coverage area (seed 003 Appendix F.1, F.2)


def roc_area(score: np.ndarray, correct: np.ndarray) -> float | None:
    """Area under the ROC curve of ``score`` for ``correct``, ties counted one half (Appendix F.1).

    Computed as the Mann-Whitney U of the average ranks: the probability that a random correct
    chain outscores a random incorrect one. None when either class is empty.
    """
    from scipy import stats as sps

    score = np.asarray(score, dtype=float)
    y = np.asarray(correct, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = sps.rankdata(score)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def selective_risk_curve(score: np.ndarray, correct: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """Selective risk at coverage k/n for k = 1..n, averaged over ``draws`` seeded tie-breaks.

    The k most confident chains are accepted (descending score; equal scores in an order drawn
    by a seeded uniform that never looks at the label), and the risk is their error rate.
    """
    score = np.asarray(score, dtype=float)
    wrong = ~np.asarray(correct, dtype=bool)
    n = score.size
    if n == 0:
        raise ValueError("selective_risk_curve: no chains")
    uniform = np.random.default_rng(seed).random((draws, n))
    order = np.lexsort((uniform, np.broadcast_to(-score, uniform.shape)), axis=-1)
    errors = np.cumsum(wrong[order], axis=1).mean(axis=0)
    return errors / np.arange(1, n + 1)


def aurc(score: np.ndarray, correct: np.ndarray, draws: int, seed: int, max_coverage: float = 1.0) -> float:
    """Area under the risk-coverage curve, lower is better (seed 003 Appendix F.2).

    Over the full curve it is the mean selective risk at every coverage level from 1/n to 1;
    truncated it is the same mean over the coverage levels k/n <= ``max_coverage`` only (the
    original's 0.737). Ties are broken by a seeded uniform averaged over ``draws`` draws, the same
    draws for both ranges, so a heavily tied binary flag is not decided by sort order.
    """
    curve = selective_risk_curve(score, correct, draws, seed)
    k_max = math.floor(max_coverage * curve.size + 1e-9)  # 1e-9: 0.737 * 1000 must keep k = 737
    if k_max < 1:
        raise ValueError(f"aurc: coverage {max_coverage} admits no level k/n with n = {curve.size}")
    return float(curve[:k_max].mean())


def ranking_table(records: pd.DataFrame, draws: int, seed: int, label: str = "correct") -> list[dict]:
    """One row per signal: ROC area, full and truncated AURC (Appendix F.1-F.2), for one cell."""
    rows = analyzed(records)
    y = _labels(rows[label])
    out = []
    for signal in in_records(rows.columns):
        name, score = signal.name, signal.score(rows)
        curve = selective_risk_curve(score, y, draws, seed) if len(rows) else np.array([])
        k_trunc = math.floor(TRUNCATED_COVERAGE * curve.size + 1e-9)
        out.append({
            "signal": name, "n": int(len(rows)), "accuracy": float(y.mean()) if len(y) else None,
            "roc_auc": roc_area(score, y) if len(rows) else None,
            "aurc_full": float(curve.mean()) if curve.size else None,
            "aurc_truncated": float(curve[:k_trunc].mean()) if k_trunc >= 1 else None,
            "aurc_oracle": float(selective_risk_curve(y.astype(float), y, 1, seed).mean()) if len(rows) else None,
        })  # fmt: skip
    return out
