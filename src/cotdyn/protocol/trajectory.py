"""Entropy trajectories and their registered summaries (seed 003 sections 2, 3.1, 3.4).

At each prefix the m continuations' answers form an empirical distribution; its Shannon entropy
in nats is one point of the trajectory. Only answer-bearing prefixes (at least one parseable
answer, or any sample at all when null answers are a class) are points.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from cotdyn.grading.answers import answers_or_none

NULL_CLASS = "<null>"


def answer_classes(answers: Sequence[str | None], null_answers: str = "drop") -> list[str]:
    """The answers that enter the distribution: nulls dropped (registered) or kept as a class."""
    answers = answers_or_none(answers)
    if null_answers == "drop":
        return [a for a in answers if a is not None]
    if null_answers == "class":
        return [NULL_CLASS if a is None else a for a in answers]
    raise ValueError(f"unknown null_answers '{null_answers}' (known: drop, class)")


def entropy(answers: Sequence[str]) -> float:
    """Shannon entropy (nats) of the empirical distribution of ``answers`` (non-empty).

    The terms are summed exactly rounded (``math.fsum``), so the value does not depend on the
    order in which the answers came: a plain sum differs in its last bit between orderings (from
    m = 6 on), and at epsilon = 0 that noise would count as a violation.
    """
    counts = Counter(answers).values()
    n = sum(counts)
    return float(-math.fsum(c / n * math.log(c / n) for c in counts)) + 0.0  # +0.0 turns -0.0 into 0.0


def majority(answers: Sequence[str]) -> str:
    """Most frequent answer; ties go to the one that appears first in sample order."""
    counts = Counter(answers)
    best = max(counts.values())
    return next(a for a in answers if counts[a] == best)


def agreement(classes: Sequence[str], label: str | None) -> float | None:
    """Share of the answer classes equal to ``label``: the final confidence in the label actually
    scored. A missing label (a chain with no answer of its own) agrees with no answer; no classes
    give None."""
    if not classes:
        return None
    return sum(1 for a in classes if label is not None and a == label) / len(classes)


def is_monotone(trajectory: Sequence[float], epsilon: float) -> bool:
    """Epsilon-monotone: H[k+1] <= H[k] + epsilon at every k."""
    return violations(trajectory, epsilon) == 0


def violations(trajectory: Sequence[float], epsilon: float) -> int:
    """Number of rises greater than epsilon."""
    return sum(1 for a, b in zip(trajectory, trajectory[1:]) if b - a > epsilon)


def coherence(trajectory: Sequence[float]) -> float:
    """C = H_0 - H_N over the answer-bearing points."""
    return trajectory[0] - trajectory[-1]


@dataclass(frozen=True)
class Trajectory:
    """The per-problem summary that records.parquet stores (docs/reference.md section 11)."""

    trajectory: list[float]
    points: list[int]  # prefix index of each point
    monotone: bool | None
    violations: int | None
    coherence: float | None
    final_entropy: float | None
    final_confidence: float | None
    pred: str | None
    excluded: bool
    exclusion_reason: str | None


def summarize(
    prefix_answers: Sequence[Sequence[str | None]],
    epsilon: float,
    null_answers: str = "drop",
    min_points: int = 2,
) -> Trajectory:
    """Trajectory, shape and magnitude of one problem from its per-prefix answers (k = 0..K).

    ``pred`` is the majority answer of the last answer-bearing prefix; ``final_confidence`` is
    the share of that prefix's answers equal to ``pred``. A problem with fewer than
    ``min_points`` answer-bearing prefixes is excluded (it admits no monotonicity test).
    """
    points, trajectory, last = [], [], None
    for k, answers in enumerate(prefix_answers):
        classes = answer_classes(answers, null_answers)
        if classes:
            points.append(k)
            trajectory.append(entropy(classes))
            last = classes
    pred = majority(last) if last else None
    confidence = agreement(last, pred)
    if len(trajectory) < min_points:
        reason = f"{len(trajectory)} answer-bearing prefixes (< {min_points})"
        return Trajectory(
            trajectory, points, None, None, None, trajectory[-1] if trajectory else None, confidence, pred, True, reason
        )
    return Trajectory(
        trajectory=trajectory,
        points=points,
        monotone=is_monotone(trajectory, epsilon),
        violations=violations(trajectory, epsilon),
        coherence=coherence(trajectory),
        final_entropy=trajectory[-1],
        final_confidence=confidence,
        pred=pred,
        excluded=False,
        exclusion_reason=None,
    )


def entropy_grid(max_samples: int) -> list[float]:
    """Every entropy value m' <= max_samples parseable answers can take, sorted (distinct).

    With m = 5 there are 13 values; the smallest positive gap between them bounds which epsilon
    values can change a monotonicity verdict (seed 003 section 8).
    """
    values = {0.0}

    def partitions(n: int, largest: int):
        if n == 0:
            yield []
            return
        for part in range(min(n, largest), 0, -1):
            for rest in partitions(n - part, part):
                yield [part] + rest

    for n in range(1, max_samples + 1):
        for parts in partitions(n, n):
            values.add(round(-sum(p / n * math.log(p / n) for p in parts), 12) + 0.0)
    return sorted(values)
