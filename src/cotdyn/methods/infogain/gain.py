"""Information gain from supervisor cross-entropies, and error detection with held-out thresholds (seed 000).

A chain's cross-entropies are l_CE(Y, g_sup(X_t)) for t = 0..T.

- Sample-wise gain (section 3.4, "Sample-Wise Information-Gain"): IG_ij = CE_i,j-1 - CE_i,j.
- Aggregate gain (section 3.4, "Estimating Information-Gain in Practice", step 4): the mean of the
  sample-wise gains over the chains that have step j.
- Detection (section 5, "Evaluation Methodology"): flagged when a score is at or below a threshold
  tau chosen on held-out data; accuracy, TPR and FPR on the test data. Every method uses the same
  convention, low score = suspect: IG (a step that adds no information), ORM probability of a
  correct final answer, Math-Shepherd share of completions that reach the gold answer.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def aggregate_gain_ragged(ce: Sequence[np.ndarray]) -> np.ndarray:
    """(longest T,) array: at step j, the mean sample-wise gain over the chains that have a step j
    (chains may differ in length); mean CE at j-1 minus mean CE at j when all have T steps."""
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


def threshold_candidates(scores: np.ndarray) -> np.ndarray:
    """-inf (flag nothing), the midpoints between consecutive distinct scores, and the largest
    score (flag everything): every distinct partition of the held-out scores, once."""
    values = np.unique(np.asarray(scores, dtype=float))
    return np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2, values[-1:]])


def select_threshold(scores: np.ndarray, is_error: np.ndarray) -> float:
    """The tau that maximises held-out accuracy of "flag when score <= tau".

    Call it with held-out (validation) scores only. Ties go to the smallest tau, the rule that
    flags fewest.
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
    """Accuracy, TPR (share of errors flagged) and FPR (share of non-errors flagged) of
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
