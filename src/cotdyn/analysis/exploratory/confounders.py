"""Confounder controls (seed 003 section 6.1, Appendix F.3) and label coupling (section 6.1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from cotdyn.analysis.exploratory.inputs import _labels, analyzed, check_records
from cotdyn.analysis.exploratory.ranking import roc_area
from cotdyn.grading.answers import answers_or_none
from cotdyn.protocol.signals import in_records

LOGIT_TERMS = ("monotone", "n_points", "final_entropy")


@dataclass(frozen=True)
class LogitFit:
    terms: tuple[str, ...]
    coef: dict[str, float] | None
    se: dict[str, float] | None
    p: dict[str, float] | None
    n: int
    reason: str | None


def standardized_logit(records: pd.DataFrame, terms: Sequence[str] = LOGIT_TERMS, label: str = "correct") -> LogitFit:
    """Logistic regression of correctness on the z-scored [monotone, trajectory length, final
    entropy] with an intercept (seed 003 Appendix F.3); unpenalized maximum likelihood (statsmodels).

    A constant term or perfect separation leaves the fit undefined; the reason is returned.
    """
    # the two names statsmodels.api exports, from their modules: the api loads the formula and time
    # series code too, some 30 MB more of the audit's memory
    from statsmodels.discrete.discrete_model import Logit
    from statsmodels.tools.tools import add_constant

    rows = analyzed(records)
    y = _labels(rows[label]).astype(float)
    x = rows[list(terms)].to_numpy(dtype=float)
    n = int(len(rows))
    sd = x.std(axis=0) if n else np.zeros(len(terms))
    constant = [t for t, s in zip(terms, sd) if s == 0]
    if n == 0 or constant or y.min(initial=0) == y.max(initial=0):
        reason = (
            "no chains" if n == 0 else (f"constant term(s): {', '.join(constant)}" if constant else "constant outcome")
        )
        return LogitFit(tuple(terms), None, None, None, n, reason)
    z = add_constant((x - x.mean(axis=0)) / sd, has_constant="add")
    try:
        fit = Logit(y, z).fit(disp=0, maxiter=200)
    except Exception as e:  # statsmodels signals perfect separation and singular designs by raising
        return LogitFit(tuple(terms), None, None, None, n, f"fit failed: {type(e).__name__}: {e}")
    names = ("const", *terms)
    if not np.all(np.isfinite(fit.bse)):
        return LogitFit(tuple(terms), None, None, None, n, "non-finite standard errors (separation)")
    return LogitFit(
        tuple(terms),
        dict(zip(names, map(float, fit.params))),
        dict(zip(names, map(float, fit.bse))),
        dict(zip(names, map(float, fit.pvalues))),
        n,
        None,
    )


def partial_correlation(x: np.ndarray, y: np.ndarray, covariate: np.ndarray) -> tuple[float | None, float | None]:
    """Partial correlation of x and y given one covariate, with its two-sided p (seed 003 section 6.1).

    Both are residualized on [1, covariate] by least squares and the residuals correlated; the
    p-value is the t test with n - 3 degrees of freedom (one covariate spent), which equals the
    OLS t test of x's coefficient in y ~ 1 + x + covariate. (None, None) when undefined.
    """
    from scipy import stats as sps

    x, y, c = (np.asarray(v, dtype=float) for v in (x, y, covariate))
    n = x.size
    if n < 4:
        return None, None
    design = np.column_stack([np.ones(n), c])
    rx = x - design @ np.linalg.lstsq(design, x, rcond=None)[0]
    ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    sxx, syy = float(rx @ rx), float(ry @ ry)
    if sxx <= 1e-12 * max(1.0, float(x @ x)) or syy <= 1e-12 * max(1.0, float(y @ y)):
        return None, None
    r = float(rx @ ry / math.sqrt(sxx * syy))
    df = n - 3
    if abs(r) >= 1:
        return r, 0.0
    t = r * math.sqrt(df / (1 - r * r))
    return r, float(2 * sps.t.sf(abs(t), df))


def max_rise(trajectory: Sequence[float]) -> float:
    """The largest single upward entropy step max_k (H[k+1] - H[k]) of a trajectory (seed 003 section 6.1)."""
    t = np.asarray(trajectory, dtype=float)
    if t.size < 2:
        raise ValueError("max_rise: a trajectory needs at least 2 points")
    return float(np.diff(t).max())


def violation_magnitude(records: pd.DataFrame, label: str = "correct") -> dict:
    """Among non-monotone chains, Spearman rho of the largest entropy rise with correctness
    (seed 003 section 6.1, Zhao's multi-violation check)."""
    from scipy import stats as sps

    rows = analyzed(records)
    non = rows.loc[~rows["monotone"].astype(bool)]
    rise = np.array([max_rise(t) for t in non["trajectory"]], dtype=float)
    y = _labels(non[label]).astype(float)
    out = {
        "n_nonmonotone": int(len(non)),
        "rho": None,
        "p": None,
        "median_max_rise": float(np.median(rise)) if rise.size else None,
    }
    if rise.size >= 3 and rise.min() < rise.max() and y.min() < y.max():
        res = sps.spearmanr(rise, y)
        out["rho"], out["p"] = float(res.statistic), float(res.pvalue)
    return out


# ---------------------------------------------------------------------------------------------
# Label coupling (seed 003 section 6.1): the scored label shares its five samples with the entropy


def label_coupling(records: pd.DataFrame) -> dict:
    """Agreement of the majority label with the chain's own answer, and each signal's ROC area and
    coherence rho under both labels (``correct`` = majority of the last prefix, ``chain_correct``)."""
    from scipy import stats as sps

    check_records(records, ("pred", "chain_answer", "chain_correct"))
    rows = analyzed(records)
    maj, own = _labels(rows["correct"]), _labels(rows["chain_correct"])
    same_answer = [
        a is not None and a == b for a, b in zip(answers_or_none(rows["pred"]), answers_or_none(rows["chain_answer"]))
    ]
    out = {
        "n": int(len(rows)),
        "answer_agreement": float(np.mean(same_answer)) if len(rows) else None,
        "label_agreement": float(np.mean(maj == own)) if len(rows) else None,
        "accuracy_majority": float(maj.mean()) if len(rows) else None,
        "accuracy_chain": float(own.mean()) if len(rows) else None,
    }
    for signal in in_records(rows.columns):
        name, score = signal.name, signal.score(rows)
        out[f"roc_{name}_majority"] = roc_area(score, maj) if len(rows) else None
        out[f"roc_{name}_chain"] = roc_area(score, own) if len(rows) else None
    for tag, y in (("majority", maj), ("chain", own)):
        c = rows["coherence"].to_numpy(dtype=float)
        defined = len(rows) >= 3 and c.min() < c.max() and y.min() < y.max()
        out[f"rho_coherence_{tag}"] = float(sps.spearmanr(c, y).statistic) if defined else None
    return out
