"""Information gain from supervisor cross-entropies, and step-level error detection (seed 000).

Cross-entropies arrive as an (n chains, T+1) array: column t is l_CE(Y, g_sup(X_t)), t = 0..T.

- Sample-wise gain (section 3.4, "Sample-Wise Information-Gain"): IG_ij = CE_i,j-1 - CE_i,j.
- Aggregate gain (section 3.4, "Estimating Information-Gain in Practice", step 4): the mean of the
  sample-wise gains over chains, which equals mean CE at j-1 minus mean CE at j.
- Per sub-task gain (same section, "Sub-task-level aggregation"): the mean sample-wise gain over
  the (chain, step) cells whose step executes that sub-task.
- Detection (section 5, "Evaluation Methodology"): a step is flagged as erroneous when its score is
  at or below a threshold tau chosen on held-out data; accuracy, TPR and FPR on the test data.
  Every method here uses the same convention, low score = suspect: IG (a step that adds no
  information), ORM probability of a correct final answer, Math-Shepherd share of completions that
  reach the gold answer.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def _as_ce(ce: np.ndarray) -> np.ndarray:
    ce = np.asarray(ce, dtype=float)
    if ce.ndim != 2 or ce.shape[1] < 2:
        raise ValueError(f"cross-entropies must be (n chains, T+1 >= 2 prefixes), got shape {ce.shape}")
    if not np.all(np.isfinite(ce)):
        raise ValueError("cross-entropies contain NaN or inf")
    return ce


def samplewise_gain(ce: np.ndarray) -> np.ndarray:
    """(n, T) array: the drop in cross-entropy from prefix t-1 to prefix t, for t = 1..T."""
    ce = _as_ce(ce)
    return ce[:, :-1] - ce[:, 1:]


def aggregate_gain(ce: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """(T,) array: mean CE at step t-1 minus mean CE at step t over the chosen chains (all by default).

    NaN for every step when no chain is chosen.
    """
    ce = _as_ce(ce)
    if rows is not None:
        ce = ce[np.asarray(rows)]
    if len(ce) == 0:
        return np.full(ce.shape[1] - 1, np.nan)
    mean = ce.mean(axis=0)
    return mean[:-1] - mean[1:]


def aggregate_gain_ragged(ce: Sequence[np.ndarray]) -> np.ndarray:
    """Aggregate gain for chains of different lengths (real traces): at step j, the mean sample-wise
    gain over the chains that have a step j. Equals ``aggregate_gain`` when all chains have T steps."""
    chains = [np.asarray(c, dtype=float) for c in ce]
    if not chains or any(c.ndim != 1 or len(c) < 2 for c in chains):
        raise ValueError("each chain needs a 1-D array of at least 2 cross-entropies (t = 0..T)")
    longest = max(len(c) for c in chains) - 1
    out = np.empty(longest)
    for j in range(1, longest + 1):
        gains = [c[j - 1] - c[j] for c in chains if len(c) > j]
        out[j - 1] = np.mean(gains)
    if not np.all(np.isfinite(out)):
        raise ValueError("cross-entropies contain NaN or inf")
    return out


def gain_by_subtask(gain: np.ndarray, subtasks: np.ndarray) -> pd.DataFrame:
    """Mean sample-wise gain per sub-task label over the (chain, step) cells that carry it.

    ``subtasks`` is an (n, T) array of labels aligned with ``gain``; ``None`` marks an unlabelled step.
    Returns columns ``subtask``, ``ig``, ``n_steps``, sorted by sub-task.
    """
    gain = np.asarray(gain, dtype=float)
    subtasks = np.asarray(subtasks, dtype=object)
    if gain.shape != subtasks.shape:
        raise ValueError(f"gain {gain.shape} and subtasks {subtasks.shape} must have the same shape")
    frame = pd.DataFrame({"subtask": subtasks.ravel(), "ig": gain.ravel()}).dropna(subset=["subtask"])
    out = frame.groupby("subtask", sort=True)["ig"].agg(ig="mean", n_steps="size").reset_index()
    return out


def step_error_labels(error_step: np.ndarray, n_steps: int) -> np.ndarray:
    """(n, T) bool: step t is wrong when the chain erred at a step <= t.

    Once a step is wrong, the states after it are wrong too (Assumption 3.1: the chain has left the
    correct path). Our reading of seed 000's Table 1, whose ORM and MS rates on LLM3 match this
    labelling of chains with a wrong final answer: steps 1-2 correct, steps 3-5 wrong.
    """
    error_step = np.asarray(error_step, dtype=int)
    if np.any(error_step < 0) or np.any(error_step > n_steps):
        raise ValueError(f"error_step must be 0 (no error) or in 1..{n_steps}")
    steps = np.arange(1, n_steps + 1)
    return (error_step[:, None] > 0) & (steps[None, :] >= error_step[:, None])


def threshold_candidates(scores: np.ndarray) -> np.ndarray:
    """-inf (flag nothing), the midpoints between consecutive distinct scores, and the largest
    score (flag everything): every distinct partition of the held-out scores, once."""
    values = np.unique(np.asarray(scores, dtype=float))
    return np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2, values[-1:]])


def select_threshold(scores: np.ndarray, is_error: np.ndarray) -> float:
    """The tau that maximises held-out accuracy of "flag when score <= tau".

    Call it with held-out (validation) scores only. Ties go to the smallest tau, the rule that
    flags fewest steps.
    """
    scores = np.asarray(scores, dtype=float).ravel()
    is_error = np.asarray(is_error, dtype=bool).ravel()
    if scores.shape != is_error.shape or len(scores) == 0:
        raise ValueError(f"scores and labels must be non-empty and aligned ({scores.shape} vs {is_error.shape})")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contain NaN or inf")
    candidates = threshold_candidates(scores)
    flagged = scores[None, :] <= candidates[:, None]
    accuracy = (flagged == is_error[None, :]).mean(axis=1)
    return float(candidates[int(np.argmax(accuracy))])


def detection_metrics(scores: np.ndarray, is_error: np.ndarray, threshold: float) -> dict:
    """Accuracy, TPR (share of wrong steps flagged) and FPR (share of correct steps flagged) of
    "flag when score <= threshold". A rate with an empty denominator is NaN."""
    scores = np.asarray(scores, dtype=float).ravel()
    is_error = np.asarray(is_error, dtype=bool).ravel()
    if scores.shape != is_error.shape:
        raise ValueError(f"scores and labels must be aligned ({scores.shape} vs {is_error.shape})")
    flagged = scores <= threshold
    tp = int(np.sum(flagged & is_error))
    fp = int(np.sum(flagged & ~is_error))
    tn = int(np.sum(~flagged & ~is_error))
    fn = int(np.sum(~flagged & is_error))
    n = tp + fp + tn + fn
    return {
        "threshold": float(threshold),
        "accuracy": (tp + tn) / n if n else np.nan,
        "tpr": tp / (tp + fn) if tp + fn else np.nan,
        "fpr": fp / (fp + tn) if fp + tn else np.nan,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
    }


def change_scores(levels: np.ndarray) -> np.ndarray:
    """(n, T) array: level at step t minus level at step t-1, from an (n, T+1) array of levels.

    The "flag the step where the probability drops" reading of ORM and Math-Shepherd: a large
    negative change is the suspect step.
    """
    levels = np.asarray(levels, dtype=float)
    if levels.ndim != 2 or levels.shape[1] < 2:
        raise ValueError(f"levels must be (n, T+1 >= 2), got shape {levels.shape}")
    return levels[:, 1:] - levels[:, :-1]


def drop_step(values: Sequence[float], reference: Sequence[float], ratio: float = 0.5) -> int:
    """The first step (1-based) whose value falls below ``ratio`` times the reference at that step;
    0 when none does.

    Used on aggregate IG of chains that went wrong against chains that stayed right: before the
    error both gain alike, from the error on the wrong chains stop gaining.
    """
    values = np.asarray(values, dtype=float)
    reference = np.asarray(reference, dtype=float)
    if values.shape != reference.shape:
        raise ValueError(f"values {values.shape} and reference {reference.shape} must align")
    below = np.flatnonzero(values < ratio * reference)
    return int(below[0]) + 1 if len(below) else 0


def largest_fall_step(levels: Sequence[float]) -> int:
    """The step t (1-based) with the largest fall level[t-1] - level[t] in an (T+1,) profile of
    levels at t = 0..T, e.g. mean ORM probability; 0 when no level falls."""
    levels = np.asarray(levels, dtype=float)
    falls = levels[:-1] - levels[1:]
    return int(np.argmax(falls)) + 1 if np.any(falls > 0) else 0
