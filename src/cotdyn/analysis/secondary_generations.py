"""Seed 003's further analyses across generations (seed 003 sections 5.1 and 7; docs/reference.md
section 6): per-problem agreement of two seeds, the spread of the registered statistics over
seeds, and the reference budget probe. Each takes a records frame per variant (or its
hypotheses.json) and, for a CI, the resample matrix of the problems it is over; the helpers and the
small-group rule are ``cotdyn.analysis.secondary``'s.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cotdyn import stats
from cotdyn.analysis.exploratory import analyzed
from cotdyn.analysis.secondary import _ci, _rows, judged
from cotdyn.files.columns import require_columns
from cotdyn.grading.answers import answers_or_none, equivalent
from cotdyn.stats import finite_or_none

# The statistics of the registered analysis whose spread across seeds is reported (hypotheses.json
# path, name); seed 003 section 7 asks how far run-to-run variation moves them.
REGISTERED_STATISTICS = (
    (("H1", "coverage"), "coverage"),
    (("H1", "accuracy"), "accuracy"),
    (("H1", "gap_pp"), "gap_pp"),
    (("H1", "p_fisher"), "p_fisher"),
    (("H2", "rho"), "rho_coherence"),
    (("H3", "rho"), "rho_violations"),
    (("H3", "p_spearman"), "p_spearman"),
    (("H5", "reduction_pp"), "reduction_pp"),
)


# ---------------------------------------------------------------------------------------------
# Across generations: two seeds per problem, the spread over seeds, the budget probe


def generation_agreement(
    a: pd.DataFrame,
    b: pd.DataFrame,
    idx: np.ndarray | None,
    level: float,
    groups=None,
    benchmark: str | None = None,
    equivalence: str = "normalized",
    answer_form: str = "as_written",
) -> list[dict]:
    """Per-problem agreement of two generations of one cell (seed 003 section 7: 47.6% of
    predictions, 76.1% of correctness, 83.3% of monotonicity flags, 3.0% of trajectories): over
    the problems analyzed in both, in ``a``'s order; ``idx`` resamples those problems.

    Two predictions agree when ``answers.equivalent`` holds under the variant's ``equivalence`` and ``answer_form`` for
    the cell's ``benchmark`` (its answer rule), as correctness is judged, or when both are null (no
    answer from either generation: the same outcome); ``n_both_null`` counts those, so the share
    among answered pairs can be recovered. Without a benchmark, predictions are compared as strings."""
    require_columns(a, ("problem_id", "pred", "correct", "monotone", "trajectory", "excluded"), "records a")
    require_columns(b, ("problem_id", "pred", "correct", "monotone", "trajectory", "excluded"), "records b")
    joint = analyzed(a).merge(analyzed(b), on="problem_id", suffixes=("_a", "_b"), validate="one_to_one")
    n = len(joint)
    pairs = list(zip(answers_or_none(joint["pred_a"]), answers_or_none(joint["pred_b"])))
    both_null = [x is None and y is None for x, y in pairs]

    def same_answer(x, y) -> bool:
        if x is None or y is None:
            return x is None and y is None
        return equivalent(x, y, benchmark, equivalence, None, answer_form) if benchmark is not None else x == y

    same = {
        "prediction": [same_answer(x, y) for x, y in pairs],
        "correctness": (joint["correct_a"].astype(bool) == joint["correct_b"].astype(bool)).tolist(),
        "monotone_flag": (joint["monotone_a"].astype(bool) == joint["monotone_b"].astype(bool)).tolist(),
        "trajectory": [list(map(float, x)) == list(map(float, y)) for x, y in zip(joint["trajectory_a"],
                                                                                   joint["trajectory_b"])],
    }  # fmt: skip
    rule = {
        "prediction": f"{equivalence} equivalence; both null agree" if benchmark else "string equality; both null agree"
    }
    out = []
    for what, agree in same.items():
        agree = np.asarray(agree, dtype=bool)
        boot = agree[_rows(idx, n)].mean(axis=1) if n else np.zeros(0)
        row = {"agreement_on": what, "n": n, "agreement": finite_or_none(agree.mean()) if n else None,
               **_ci(boot, level, boot.size), "rule": rule.get(what),
               "n_both_null": int(sum(both_null)) if what == "prediction" else None,
               "reason": None if n else "no problem analyzed in both"}  # fmt: skip
        out.append(judged(row, {"problems analyzed in both": n}, groups, ("agreement", "ci_lo", "ci_hi"), boot.size))
    return out


def joint_problems(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """How many problems two generations both analyzed (the width of their agreement's resample matrix)."""
    return int(analyzed(a)["problem_id"].isin(set(analyzed(b)["problem_id"])).sum())


def seed_spread(results: Mapping[str, Mapping], cells: Sequence[str]) -> list[dict]:
    """Each registered statistic of each cell across generations that differ only in their seed
    (``results``: variant -> hypotheses.json): its value per seed, min, max, range and standard
    deviation (ddof 1) over the seeds where it is defined."""
    out = []
    for cell in cells:
        for path, name in REGISTERED_STATISTICS:
            values = {}
            for variant, result in sorted(results.items()):
                block = result["cells"].get(cell, {})
                for key in path:
                    block = block.get(key, {}) if isinstance(block, Mapping) else {}
                values[variant] = finite_or_none(block) if not isinstance(block, Mapping) else None
            defined = np.array([v for v in values.values() if v is not None], dtype=float)
            out.append({
                "cell": cell, "statistic": name, "n_seeds": len(values), "n_defined": int(defined.size),
                **{f"value_{v}": x for v, x in values.items()},
                "min": finite_or_none(defined.min()) if defined.size else None,
                "max": finite_or_none(defined.max()) if defined.size else None,
                "range": finite_or_none(np.ptp(defined)) if defined.size else None,
                "sd": finite_or_none(defined.std(ddof=1)) if defined.size >= 2 else None,
            })  # fmt: skip
    return out


def completion_rows(tokens: np.ndarray, truncated: np.ndarray, budget: int, idx: np.ndarray) -> np.ndarray:
    """Per resample row of ``idx``, the Kaplan-Meier completion 1 - S(budget) of the chains it drew
    (``exploratory.coverage_curve``'s product-limit estimator, with each chain weighted by how often
    the row drew it): completion is the event, a truncated chain is censored at its length."""
    tokens = np.asarray(tokens, dtype=np.int64)
    truncated = np.asarray(truncated, dtype=bool)
    times = np.unique(tokens[~truncated & (tokens <= budget)])
    weights = stats.category_counts(np.arange(tokens.size), idx, tokens.size).astype(float)  # (rows, chains)
    at_risk = weights @ (tokens[:, None] >= times[None, :]).astype(float)
    events = weights @ ((tokens[:, None] == times[None, :]) & ~truncated[:, None]).astype(float)
    factor = 1.0 - np.divide(events, at_risk, out=np.zeros_like(events), where=at_risk > 0)
    return 1.0 - factor.prod(axis=1)


def budget_probe(records: pd.DataFrame, budget: int, idx: np.ndarray | None, level: float) -> dict:
    """From a reference-only probe at a larger budget (every chain of the cell, excluded or not):
    the fraction of chains completing within ``budget`` tokens (the registered reference budget;
    seed 003 section 5.1: 64.0% at 600 for the anchor's MATH-500), by Kaplan-Meier with completion
    the event and truncation censoring, and the CI of that same estimator over the resamples
    (``completion_rows``); ``n_censored_below_budget`` counts chains censored at or below the budget,
    where the estimator differs from a plain share. Also the longest uncensored chain (2,390 tokens
    at 4096 there; a maximum has no bootstrap CI). A probe whose every censored chain stops at or
    below the budget is no probe of it (an error)."""
    require_columns(records, ("reference_tokens", "reference_truncated"), "records")
    tokens = records["reference_tokens"].to_numpy(dtype=np.int64)
    truncated = records["reference_truncated"].to_numpy(dtype=bool)
    n = int(tokens.size)
    if n == 0:
        return {"n": 0, "budget": int(budget), "completed": None, "ci_lo": None, "ci_hi": None, "ci_n_kept": 0,
                "longest_uncensored": None, "n_censored": 0, "n_censored_below_budget": 0,
                "reason": "no chains"}  # fmt: skip
    probe_budget = int(tokens[truncated].max()) if truncated.any() else None
    if probe_budget is not None and probe_budget <= budget:
        raise ValueError(
            f"budget_probe: chains censored at {probe_budget} tokens cannot say what completes by {budget}"
        )
    point = completion_rows(tokens, truncated, budget, stats.full_sample(n))[0]
    boot = completion_rows(tokens, truncated, budget, _rows(idx, n))
    return {
        "n": n, "budget": int(budget), "completed": float(point), **_ci(boot, level, boot.size),
        "longest_uncensored": int(tokens[~truncated].max()) if (~truncated).any() else None,
        "n_censored": int(truncated.sum()), "n_censored_below_budget": int((truncated & (tokens <= budget)).sum()),
        "reason": None,
    }  # fmt: skip
