"""Math-Shepherd labels (Wang et al., 2024; seed 000's annotation-free baseline), without torch.

From the prefix through step t, N completions by the generator itself; the soft label is the share
that reach the gold answer, the hard label is 1 when any does. ``math_shepherd_from_samples`` labels
the study's own traces from the continuations the pipeline already drew (rule math_shepherd, in
envs/analysis.yaml); the toy experiment (``cotdyn.infogain``) uses ``math_shepherd_labels``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .answers import answer_or_none, equivalent


def math_shepherd_labels(completions_correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Soft and hard Math-Shepherd labels from an (n prefixes, N completions) bool array.

    soft = share of completions reaching the gold answer; hard = 1 when at least one does.
    """
    hits = np.asarray(completions_correct, dtype=bool)
    if hits.ndim != 2 or hits.shape[1] == 0:
        raise ValueError(f"completions_correct must be (n prefixes, N >= 1 completions), got shape {hits.shape}")
    return hits.mean(axis=1), hits.any(axis=1).astype(float)


def math_shepherd_from_samples(
    samples: pd.DataFrame, records: pd.DataFrame, benchmark: str, equivalence: str = "normalized"
) -> pd.DataFrame:
    """Math-Shepherd labels of LLM traces from the continuations the pipeline already drew.

    Each (problem, prefix) row of ``samples`` is one prefix with its m completions; a completion
    reaches the gold answer when its extracted answer is equivalent to the record's gold under
    ``equivalence`` (the variant's, as correctness uses). Pass the variant's samples
    (``protocol.variant_samples``: its m and endpoint). Returns one row per (problem, prefix):
    ``soft`` (share reaching gold) and ``hard`` (any).
    """
    gold = records.set_index("problem_id")["gold"]
    hits = [
        equivalent(answer_or_none(a), answer_or_none(gold.get(p)), benchmark, equivalence)
        for p, a in zip(samples["problem_id"], samples["answer"])
    ]
    table = samples[["problem_id", "prefix", "prefix_tokens"]].assign(hit=hits)
    rows = []
    for (problem, prefix), group in table.groupby(["problem_id", "prefix"], sort=True):
        soft, hard = math_shepherd_labels(group["hit"].to_numpy()[None, :])
        rows.append(
            {
                "problem_id": problem,
                "prefix": prefix,
                "prefix_tokens": int(group["prefix_tokens"].iloc[0]),
                "n": len(group),
                "soft": float(soft[0]),
                "hard": float(hard[0]),
            }
        )
    return pd.DataFrame(rows)
