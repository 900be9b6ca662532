"""Samples -> answer-distribution trajectories (seed 002 Appendix A.4-A.5), and the checks of their input."""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.grading.answers import answers_or_none, is_answered

NULL = "<null>"
TIE_TOL = 1e-12  # probabilities are counts / N; the tolerance only absorbs float noise in sums
SUM_TOL = 1e-9

SAMPLE_COLUMNS = ("problem_id", "prefix", "sample", "prefix_tokens", "answer", "status")

State = dict[str, float]


# ---------------------------------------------------------------------------------------------
# Input checks


def _check_samples(samples: pd.DataFrame) -> None:
    require_columns(samples, SAMPLE_COLUMNS, "samples")
    if "cell" in samples.columns and samples["cell"].nunique() > 1:
        raise ValueError("samples: 'cell' holds several cells; pass one cell's samples at a time")
    null = pd.Series(~is_answered(samples["answer"]), index=samples.index)
    bad_status = ~samples["status"].isin(["ok", "no_answer"])
    if bad_status.any():
        example = samples.loc[bad_status, "status"].iloc[0]
        raise ValueError(f"samples: 'status' must be 'ok' or 'no_answer', got {example!r}")
    mismatch = null != (samples["status"] == "no_answer")
    if mismatch.any():
        row = samples.loc[mismatch].iloc[0]
        raise ValueError(
            f"samples: 'answer' and 'status' disagree in {int(mismatch.sum())} row(s), e.g. problem "
            f"{row['problem_id']!r} prefix {row['prefix']}: answer={row['answer']!r} status={row['status']!r}"
        )
    if (samples.loc[~null, "answer"] == NULL).any():
        raise ValueError(f"samples: 'answer' contains the null sentinel {NULL!r} as a real answer")
    dup = samples.duplicated(["problem_id", "prefix", "sample"])
    if dup.any():
        row = samples.loc[dup].iloc[0]
        raise ValueError(
            f"samples: duplicate (problem_id, prefix, sample) = "
            f"({row['problem_id']!r}, {row['prefix']}, {row['sample']})"
        )


def _check_state(state: State, k: int) -> None:
    if not state:
        raise ValueError(f"checkpoint {k}: empty answer distribution (drop it with observed_states)")
    values = state.values()
    if min(values) < 0 or abs(math.fsum(values) - 1.0) > SUM_TOL:
        raise ValueError(f"checkpoint {k}: probabilities must be >= 0 and sum to 1, got {state}")


def _check_trajectory(states: Sequence[State]) -> None:
    if len(states) == 0:
        raise ValueError("trajectory has no checkpoints")
    for k, state in enumerate(states):
        _check_state(state, k)


# ---------------------------------------------------------------------------------------------
# Samples -> answer-distribution trajectories (Appendix A.4-A.5)


def distributions(samples: pd.DataFrame, null_class: bool = True) -> dict[str, list[State]]:
    """Empirical answer distribution p_k(a) = #{j: Y_j = a} / N at each checkpoint (App. A.4).

    Returns problem_id -> one state per checkpoint, in ``prefix`` order, answers in sorted order.
    ``null_class=True`` (seed 002) counts null answers as the class ``NULL``; ``False`` drops them
    before normalising, leaving ``{}`` where every sample was null. ``samples`` holds one cell.
    """
    _check_samples(samples)
    frame = samples[["problem_id", "prefix", "answer"]].copy()
    frame["answer"] = [NULL if a is None else a for a in answers_or_none(frame["answer"])]
    checkpoints = frame.groupby(["problem_id", "prefix"], sort=True).size().index
    if not null_class:
        frame = frame[frame["answer"] != NULL]
    counts = frame.groupby(["problem_id", "prefix", "answer"], sort=True).size()
    totals = counts.groupby(level=["problem_id", "prefix"]).transform("sum")
    probs = (counts / totals).to_dict()
    states: dict[tuple, State] = {}
    for (pid, prefix, answer), p in probs.items():
        states.setdefault((pid, prefix), {})[answer] = float(p)
    out: dict[str, list[State]] = {}
    for pid, prefix in checkpoints:
        out.setdefault(pid, []).append(states.get((pid, prefix), {}))
    return out


def checkpoint_positions(samples: pd.DataFrame) -> dict[str, list[int]]:
    """problem_id -> prefix token counts of its checkpoints, aligned with ``distributions``.

    Each (problem, prefix) must carry one ``prefix_tokens`` value, strictly increasing in prefix
    order, because Figure 3 places checkpoints on a token time axis.
    """
    require_columns(samples, ("problem_id", "prefix", "prefix_tokens"), "samples")
    per = samples.groupby(["problem_id", "prefix"], sort=True)["prefix_tokens"].agg(["min", "max"])
    ragged = per["min"] != per["max"]
    if ragged.any():
        pid, prefix = per.index[ragged][0]
        raise ValueError(f"samples: 'prefix_tokens' differs across samples of problem {pid!r} prefix {prefix}")
    out: dict[str, list[int]] = {}
    for (pid, _), tokens in per["min"].items():
        out.setdefault(pid, []).append(int(tokens))
    for pid, tokens in out.items():
        if any(b <= a for a, b in zip(tokens, tokens[1:])):
            raise ValueError(f"samples: 'prefix_tokens' of problem {pid!r} not strictly increasing: {tokens}")
    return out


def observed_states(states: Sequence[State]) -> list[int]:
    """Indices of the checkpoints with a nonempty state: the ones metrics use (Appendix B)."""
    return [k for k, s in enumerate(states) if s]
