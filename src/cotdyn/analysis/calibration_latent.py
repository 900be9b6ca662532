"""The calibration grid's second process, not the project's simulator (issue 49 item 3): four
correlated latent Gaussians sharing one factor F, cut into levels with heavy ties: violations 0..4
(0 = monotone), coherence on 3 levels, final confidence on 5; correct = its latent above a threshold.
Given F the four are independent, so the exact law of the cut table is a one-dimensional
Gauss-Hermite integral (``latent_population``), and each statistic's truth is read off it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

# --- the latent process -------------------------------------------------------------------------

# Cumulative shares of the latent cut points: violations 0 (monotone) .. 4 with a heavy tie at 0 and
# at 1; coherence on three levels; confidence on five (1/5 .. 5/5).
VIOLATION_CUTS = (0.45, 0.75, 0.9, 0.97)
COHERENCE_LEVELS = (-0.5, 0.0, 0.5)
COHERENCE_CUTS = (0.3, 0.7)
CONFIDENCE_CUTS = (0.2, 0.4, 0.6, 0.8)


@dataclass(frozen=True)
class LatentLaw:
    """Loadings on the common factor F of the four latents; the correlation of two latents is the
    product of their loadings. Loading 0 on ``correct`` makes every feature independent of it (the null)."""

    accuracy: float
    correct: float = 0.0
    violations: float = -0.6
    coherence: float = 0.4
    confidence: float = 0.6

    @classmethod
    def signal(cls, accuracy: float) -> "LatentLaw":
        return cls(accuracy, correct=0.7)


def _cut_probabilities(loading: float, cuts, f: np.ndarray) -> np.ndarray:
    """P(level | F = f) for a latent Z = loading F + sqrt(1 - loading^2) E cut at N(0,1) quantiles
    ``cuts``; shape (levels, nodes)."""
    from scipy.stats import norm

    edges = np.concatenate([[-np.inf], norm.ppf(cuts), [np.inf]])
    scale = math.sqrt(1 - loading**2)
    cdf = norm.cdf((edges[:, None] - loading * f[None, :]) / scale)
    return np.diff(cdf, axis=0)


def latent_population(law: LatentLaw, nodes: int = 120) -> pd.DataFrame:
    """The exact law of (violations, coherence, final_confidence, correct) under ``law``: one row per
    value with its ``mass``. Given F the latents are independent, so each mass is the integral over
    F of a product of normal interval probabilities (Gauss-Hermite, ``nodes`` nodes: error far below
    1e-10 for these smooth integrands)."""
    f, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    threshold = 1 - law.accuracy  # correct when its latent is above the (1 - accuracy) quantile
    parts = [
        _cut_probabilities(law.violations, VIOLATION_CUTS, f),
        _cut_probabilities(law.coherence, COHERENCE_CUTS, f),
        _cut_probabilities(law.confidence, CONFIDENCE_CUTS, f),
        _cut_probabilities(law.correct, (threshold,), f)[::-1],  # row 0: correct, row 1: not
    ]
    mass = np.einsum("an,bn,cn,dn,n->abcd", *parts, w)
    v, c, q, y = np.meshgrid(*(np.arange(s) for s in mass.shape), indexing="ij")
    return pd.DataFrame(
        {
            "violations": v.ravel(),
            "coherence": np.asarray(COHERENCE_LEVELS)[c.ravel()],
            "final_confidence": (q.ravel() + 1) / 5.0,
            "correct": y.ravel() == 0,
            "mass": mass.ravel(),
        }
    )


def grade_correlation(population: pd.DataFrame, column: str) -> float:
    """Population Spearman rho of ``column`` with correct: the limit of the sample rho with average
    ranks, corr(G(X), Y) with G(x) = P(X < x) + P(X = x) / 2 (a midrank over n tends to G)."""
    marginal = population.groupby(column)["mass"].sum().sort_index()
    grade = (marginal.cumsum() - marginal / 2).rename("grade")
    frame = population.join(grade, on=column)
    m, g, y = frame["mass"].to_numpy(), frame["grade"].to_numpy(), frame["correct"].to_numpy(dtype=float)
    eg, ey = (m * g).sum(), (m * y).sum()
    cov = (m * g * y).sum() - eg * ey
    return float(cov / math.sqrt(((m * g * g).sum() - eg**2) * ey * (1 - ey)))


def gap_pp_of(population: pd.DataFrame) -> float:
    """H1's population gap: accuracy with 0 violations minus accuracy with some, in pp."""
    mono = population["violations"] == 0
    m, y = population["mass"], population["correct"]
    return 100 * float((m * y)[mono].sum() / m[mono].sum() - (m * y)[~mono].sum() / m[~mono].sum())
