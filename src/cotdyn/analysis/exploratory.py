"""Exploratory analyses over stored records (seed 003 sections 5, 6.1, 8 and Appendix F; docs/design.md section 6).

Everything here is outside the registration and is computed from records.parquet (docs/design.md section 11)
alone: no model runs. Each function takes a records frame (or arrays) and returns plain data; the
tables are assembled in ``cotdyn.report.exploratory_tables`` and written there. A signal is oriented so that a higher
score means "more likely correct": the monotone flag, the negated violation count, the negated final
entropy, and coherence C = H_0 - H_N as it stands (seed 003 Appendix F.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats as sps

from cotdyn import stats
from cotdyn.files.columns import require_columns
from cotdyn.grading.answers import answers_or_none
from cotdyn.protocol.trajectory import entropy_grid, violations

# The signal name and how its score is read from a records frame (higher = predicted correct).
SIGNALS = {
    "monotone": lambda r: r["monotone"].to_numpy(dtype=float),
    "violations": lambda r: -r["violations"].to_numpy(dtype=float),
    "final_entropy": lambda r: -r["final_entropy"].to_numpy(dtype=float),
    "coherence": lambda r: r["coherence"].to_numpy(dtype=float),
}
# The original's operating point: selective accuracy at 73.7% coverage (seed 003 Appendix F.2).
TRUNCATED_COVERAGE = 0.737
EPSILONS = (0.0, 0.01, 0.05, 0.10)
LOGIT_TERMS = ("monotone", "n_points", "final_entropy")
REQUIRED = (
    "cell",
    "problem_id",
    "trajectory",
    "n_points",
    "monotone",
    "violations",
    "coherence",
    "final_entropy",
    "correct",
    "excluded",
)


def check_records(records: pd.DataFrame, columns: Sequence[str] = REQUIRED, source: str = "records") -> None:
    require_columns(records, columns, source)


def analyzed(records: pd.DataFrame) -> pd.DataFrame:
    """The non-excluded rows, in problem order; these are the problems every statistic is over."""
    check_records(records, ("excluded",))
    if records["excluded"].isna().any():
        raise ValueError("records: column 'excluded' has missing values")
    return records.loc[~records["excluded"].astype(bool)].reset_index(drop=True)


def _labels(values) -> np.ndarray:
    y = pd.Series(values)
    if y.isna().any():
        raise ValueError("label column has missing values")
    return y.to_numpy(dtype=bool)


# ---------------------------------------------------------------------------------------------
# Ranking signals: ROC area and risk-coverage area (seed 003 Appendix F.1, F.2)


def roc_area(score: np.ndarray, correct: np.ndarray) -> float | None:
    """Area under the ROC curve of ``score`` for ``correct``, ties counted one half (Appendix F.1).

    Computed as the Mann-Whitney U of the average ranks: the probability that a random correct
    chain outscores a random incorrect one. None when either class is empty.
    """
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
    for name, read in SIGNALS.items():
        score = read(rows)
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


# ---------------------------------------------------------------------------------------------
# Confounder controls (seed 003 section 6.1, Appendix F.3)


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
    z = sm.add_constant((x - x.mean(axis=0)) / sd, has_constant="add")
    try:
        fit = sm.Logit(y, z).fit(disp=0, maxiter=200)
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
    for name, read in SIGNALS.items():
        score = read(rows)
        out[f"roc_{name}_majority"] = roc_area(score, maj) if len(rows) else None
        out[f"roc_{name}_chain"] = roc_area(score, own) if len(rows) else None
    for tag, y in (("majority", maj), ("chain", own)):
        c = rows["coherence"].to_numpy(dtype=float)
        defined = len(rows) >= 3 and c.min() < c.max() and y.min() < y.max()
        out[f"rho_coherence_{tag}"] = float(sps.spearmanr(c, y).statistic) if defined else None
    return out


# ---------------------------------------------------------------------------------------------
# Trajectory-derived variants: early exit and the epsilon sweep (seed 003 sections 6.1, 8)


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


# ---------------------------------------------------------------------------------------------
# Reference-budget coverage curves (seed 003 section 5.1, Figure 1)


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


# ---------------------------------------------------------------------------------------------
# Sensitivity sweeps against the registered cell (docs/design.md section 6)

SWEEP_FIELDS = (
    "n",  # every record of the cell; n_analyzed those kept after exclusions (the panel table's n)
    "n_analyzed",
    "n_excluded",
    "accuracy",
    "monotone_coverage",
    "gap_pp",
    "truncation_rate",
    "cap_hit_rate",
    "median_reference_tokens",
    "p90_reference_tokens",
)


def chain_length_stats(records: pd.DataFrame) -> dict:
    """Median and 90th percentile of the reference chain length in tokens (seed 003 section 5.1)."""
    check_records(records, ("reference_tokens",))
    tokens = records["reference_tokens"].to_numpy(dtype=float)
    if tokens.size == 0:
        return {"median_reference_tokens": None, "p90_reference_tokens": None}
    return {
        "median_reference_tokens": float(np.median(tokens)),
        "p90_reference_tokens": float(np.quantile(tokens, 0.9)),
    }


def sweep_table(
    summaries: Mapping[str, Mapping[str, dict]],
    registered: str = "registered",
    chain_lengths: Mapping[str, Mapping[str, dict]] | None = None,
) -> list[dict]:
    """One row per (variant, cell): the summary fields and their difference from the registered
    cell (``delta_<field>``, variant minus registered). Rate deltas stay in rate units; gap_pp is
    already in points. ``chain_lengths`` (variant -> cell -> ``chain_length_stats``) adds the
    median and p90 chain length, which summary.json does not hold."""
    if registered not in summaries:
        raise KeyError(f"sweep_table: no summaries for the registered variant '{registered}'")
    chain_lengths = chain_lengths or {}

    def fields(variant: str, cell: str) -> dict | None:
        s = summaries.get(variant, {}).get(cell)
        if s is None:
            return None
        row = {f: s.get(f) for f in SWEEP_FIELDS} | {"gap_pp_reason": s.get("gap_pp_reason")}
        row.update(chain_lengths.get(variant, {}).get(cell, {}))
        return row

    out = []
    for variant in sorted(summaries, key=lambda v: (v != registered, v)):
        for cell in sorted(summaries[variant]):
            mine, ref = fields(variant, cell), fields(registered, cell)
            row = {"variant": variant, "cell": cell} | mine
            for f in SWEEP_FIELDS:
                a, b = mine.get(f), (ref or {}).get(f)
                row[f"delta_{f}"] = None if a is None or b is None else float(a) - float(b)
            out.append(row)
    return out
