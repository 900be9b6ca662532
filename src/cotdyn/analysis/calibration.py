"""Records-level simulator with planted truths (docs/reference.md sections 8 and 10).

It plants the quantities the registered analysis estimates (seed 003 sections 3.4 and 4):
monotone coverage, accuracy among monotone and among non-monotone problems (hence the accuracy
gap), a violation count that is 0 exactly for monotone problems, and a final-answer confidence
whose dependence on correctness is set directly. With equal accuracies and equal correct/incorrect
rates every registered p-value-bearing test (H1 Fisher, H3 Spearman) is under its null.

Trajectories are generated to agree with ``monotone``, ``violations`` and ``n_points``: they move
over the entropies an m = 5 answer distribution can take, one level up where a violation is
planted, level or one down elsewhere. Their values are otherwise illustrative, and coherence is
not a planted quantity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from cotdyn.protocol.trajectory import entropy_grid
from cotdyn.records.factory import records_frame
from cotdyn.stats import derive_seed

MAX_POINTS = 9  # cap 8 units -> prefixes k = 0..8
EXCLUSION_REASON = "fewer than 2 answer-bearing prefixes"


@dataclass(frozen=True)
class PlantedCell:
    """The planted truth of one cell. Rates are per usable (non-excluded) problem."""

    n: int
    coverage: float
    acc_monotone: float
    acc_non_monotone: float
    exclusion_rate: float = 0.0
    # Chance that each further transition of a non-monotone chain is also a violation.
    violation_rate_correct: float = 0.15
    violation_rate_incorrect: float = 0.35
    # Chance that each of the other 4 of m = 5 final samples agrees with the majority answer.
    confidence_correct: float = 0.85
    confidence_incorrect: float = 0.55

    def __post_init__(self) -> None:
        for name in ("coverage", "acc_monotone", "acc_non_monotone", "exclusion_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"PlantedCell.{name} must lie in [0, 1], got {value}")

    @property
    def gap_pp(self) -> float:
        return 100.0 * (self.acc_monotone - self.acc_non_monotone)

    @classmethod
    def from_summary(
        cls, n: int, coverage: float, accuracy: float, gap_pp: float, exclusion_rate: float = 0.0, **kw
    ) -> "PlantedCell":
        """The cell with the given overall accuracy and gap at the given coverage."""
        gap = gap_pp / 100.0
        return cls(
            n=n,
            coverage=coverage,
            acc_monotone=accuracy + (1 - coverage) * gap,
            acc_non_monotone=accuracy - coverage * gap,
            exclusion_rate=exclusion_rate,
            **kw,
        )

    @classmethod
    def null(cls, n: int, coverage: float, accuracy: float, exclusion_rate: float = 0.0) -> "PlantedCell":
        """Correctness independent of monotonicity, violations and confidence."""
        return cls(
            n=n,
            coverage=coverage,
            acc_monotone=accuracy,
            acc_non_monotone=accuracy,
            exclusion_rate=exclusion_rate,
            violation_rate_correct=0.25,
            violation_rate_incorrect=0.25,
            confidence_correct=0.7,
            confidence_incorrect=0.7,
        )


@dataclass(frozen=True)
class SimulatedLabels:
    """Per-problem arrays of one simulated cell (excluded rows included, flagged)."""

    excluded: np.ndarray
    monotone: np.ndarray
    correct: np.ndarray
    violations: np.ndarray
    n_points: np.ndarray
    final_confidence: np.ndarray


def simulate_labels(truth: PlantedCell, rng: np.random.Generator) -> SimulatedLabels:
    """Draw one cell's labels from its planted truth, vectorized (fast enough for calibration)."""
    n = truth.n
    excluded = rng.random(n) < truth.exclusion_rate
    monotone = (rng.random(n) < truth.coverage) & ~excluded
    acc = np.where(monotone, truth.acc_monotone, truth.acc_non_monotone)
    correct = (rng.random(n) < acc) & ~excluded
    n_points = np.where(excluded, rng.integers(0, 2, n), rng.integers(2, MAX_POINTS + 1, n))
    rate = np.where(correct, truth.violation_rate_correct, truth.violation_rate_incorrect)
    extra = rng.binomial(np.maximum(n_points - 2, 0), rate)
    violations = np.where(monotone | excluded, 0, 1 + extra)
    agree = rng.binomial(4, np.where(correct, truth.confidence_correct, truth.confidence_incorrect))
    final_confidence = np.where(excluded, np.nan, (1 + agree) / 5.0)
    return SimulatedLabels(excluded, monotone, correct, violations, n_points, final_confidence)


def feature_population(truth: PlantedCell) -> pd.DataFrame:
    """The exact law of (violations, final_confidence, correct) over a cell's usable problems under
    ``simulate_labels``: one row per value with its probability ``mass`` (summing to 1). Monotone
    problems have 0 violations; a non-monotone one 1 + Binomial(n_points - 2, rate), n_points
    uniform on 2..MAX_POINTS; confidence (1 + Binomial(4, q)) / 5; rate and q set by correctness.
    Exclusion is independent of all of it, so the usable law does not depend on it. The H5
    calibration reads its planted truth off this law (``h5_planted_reduction_pp``)."""
    from scipy.stats import binom

    mass: dict[tuple[int, float, bool], float] = {}
    lengths = np.arange(2, MAX_POINTS + 1)
    for correct in (True, False):
        q = truth.confidence_correct if correct else truth.confidence_incorrect
        rate = truth.violation_rate_correct if correct else truth.violation_rate_incorrect
        confidence = binom.pmf(np.arange(5), 4, q)
        extra = np.zeros(MAX_POINTS - 1)
        for n_points in lengths:
            extra[: n_points - 1] += binom.pmf(np.arange(n_points - 1), n_points - 2, rate) / lengths.size
        for monotone in (True, False):
            acc = truth.acc_monotone if monotone else truth.acc_non_monotone
            weight = (truth.coverage if monotone else 1 - truth.coverage) * (acc if correct else 1 - acc)
            violations = {0: 1.0} if monotone else {1 + e: float(p) for e, p in enumerate(extra)}
            for v, pv in violations.items():
                for j, pc in enumerate(confidence):
                    key = (v, (1 + j) / 5.0, correct)
                    mass[key] = mass.get(key, 0.0) + weight * pv * float(pc)
    rows = [{"violations": v, "final_confidence": c, "correct": y, "mass": m} for (v, c, y), m in sorted(mass.items())]
    return pd.DataFrame(rows)


def h5_planted_reduction_pp(
    population: pd.DataFrame, coefficients, intercept: float, coverage: float, acc_monotone: float
) -> float:
    """H5's estimand for one fitted filter (raw features, ``analysis.h5.model.scaling: none``): the
    population accuracy of the top ``coverage`` mass by P(correct) = sigmoid(intercept + x . coef)
    over (violations, final_confidence), ties shared uniformly, minus the monotone problems'
    accuracy, in pp (the false-positive reduction at matched coverage, with the model held fixed)."""
    x = population[["violations", "final_confidence"]].to_numpy(dtype=float)
    logit = intercept + x @ np.asarray(coefficients, dtype=float)
    frame = pd.DataFrame(
        {"logit": logit, "mass": population["mass"], "right": population["mass"] * population["correct"]}
    )
    tiers = frame.groupby("logit", sort=True)[["mass", "right"]].sum().iloc[::-1]  # descending P(correct)
    before = tiers["mass"].cumsum() - tiers["mass"]
    accepted = np.clip(coverage - before, 0.0, tiers["mass"])
    acc_filter = float((accepted * tiers["right"] / tiers["mass"]).sum() / coverage)
    return 100.0 * (acc_filter - acc_monotone)


ENTROPY_LEVELS = np.array(entropy_grid(5))


def _trajectory(n_points: int, violations: int, rng: np.random.Generator) -> list[float]:
    """Entropies on the m = 5 levels whose rises fall exactly on ``violations`` transitions."""
    if n_points == 0:
        return []
    steps = -rng.integers(0, 2, n_points - 1)  # stay or fall one level
    rises = rng.choice(n_points - 1, size=violations, replace=False) if violations else []
    steps[rises] = 1
    path = np.concatenate([[0], np.cumsum(steps)])
    path -= path.min()
    path += rng.integers(0, ENTROPY_LEVELS.size - path.max())
    return [float(h) for h in ENTROPY_LEVELS[path]]


def simulate_records(truth: PlantedCell, cell: str, seed: int) -> pd.DataFrame:
    """One cell's records frame with every docs/reference.md section 11 column, drawn from its planted truth."""
    rng = np.random.default_rng(derive_seed(seed, cell))
    labels = simulate_labels(truth, rng)
    trajectories = [_trajectory(int(k), int(v), rng) for k, v in zip(labels.n_points, labels.violations)]
    usable = ~labels.excluded
    gold = [str(i) for i in range(truth.n)]
    pred = [
        None if ex else (g if ok else str(i + 1000))
        for i, (g, ok, ex) in enumerate(zip(gold, labels.correct, labels.excluded))
    ]
    reference_tokens = rng.integers(80, 601, truth.n)
    raw_units = np.where(usable, labels.n_points - 1 + rng.integers(0, 3, truth.n), labels.n_points)
    # the one records factory: every column planted here is given, and each declared signal with a
    # ``derive`` is derived from these trajectories (cotdyn.records.factory)
    return records_frame(
        cell=cell,
        problem_id=[f"{cell.rpartition('-')[2]}-{i:04d}" for i in range(truth.n)],
        trajectory=trajectories,
        n_points=labels.n_points.astype(int),
        monotone=labels.monotone,
        violations=labels.violations.astype(int),
        coherence=[t[0] - t[-1] if len(t) >= 2 else np.nan for t in trajectories],
        final_entropy=[t[-1] if t else np.nan for t in trajectories],
        final_confidence=labels.final_confidence,
        pred=pred,
        gold=gold,
        correct=labels.correct,
        chain_answer=pred,
        chain_correct=labels.correct,
        excluded=labels.excluded,
        exclusion_reason=[EXCLUSION_REASON if ex else None for ex in labels.excluded],
        reference_tokens=reference_tokens.astype(int),
        reference_truncated=reference_tokens == 600,
        raw_units=raw_units.astype(int),
        cap_hit=raw_units >= MAX_POINTS - 1,
    )


def simulate_panel(truths: Mapping[str, PlantedCell], seed: int) -> pd.DataFrame:
    """Concatenated records of several cells, each drawn from its own seeded stream."""
    frames = [simulate_records(truth, cell, seed) for cell, truth in truths.items()]
    return pd.concat(frames, ignore_index=True)


def paper_panel(scale: float = 1.0) -> dict[str, PlantedCell]:
    """The eight registered cells planted at seed 003 section 4's table (n, exclusion, accuracy,
    coverage, gap); ``scale`` shrinks n for fast tests."""
    table = {
        "qwen7b-gsm8k": (1319, 0.017, 0.563, 0.846, 9.62),
        "qwen7b-math500": (500, 0.002, 0.146, 0.505, 27.49),
        "mistral7b-gsm8k": (1319, 0.140, 0.693, 0.466, 20.74),
        "mistral7b-math500": (500, 0.086, 0.302, 0.085, 7.50),
        "llama31-8b-gsm8k": (1319, 0.002, 0.511, 0.793, 21.86),
        "llama31-8b-math500": (500, 0.016, 0.157, 0.309, 21.88),
        "r1-distill-7b-gsm8k": (1319, 0.0, 0.013, 0.340, 48.94),
        "r1-distill-7b-math500": (500, 0.0, 0.006, 0.234, 9.99),
    }
    return {
        cell: PlantedCell.from_summary(max(3, round(n * scale)), cov, acc, gap, exclusion_rate=excl)
        for cell, (n, excl, cov, acc, gap) in table.items()
    }


def heavy_ties_population(pi: float) -> pd.DataFrame:
    """A feature law with heavy ties, not the simulator's: 2 violation levels (0, 1) and 3
    confidence levels (0.2, 0.6, 1), independent given correctness (P(correct) = ``pi``); 6 feature
    rows in all, so most test problems tie at H5's cut."""
    rows = []
    for correct, weight in ((True, pi), (False, 1 - pi)):
        zero = 0.6 if correct else 0.35
        confidence = (0.2, 0.3, 0.5) if correct else (0.45, 0.35, 0.2)
        for v, pv in ((0, zero), (1, 1 - zero)):
            for c, pc in zip((0.2, 0.6, 1.0), confidence):
                rows.append({"violations": v, "final_confidence": c, "correct": correct, "mass": weight * pv * pc})
    return pd.DataFrame(rows)


def correlated_population(pi: float, shift: float = 0.6, rho: float = -0.5) -> pd.DataFrame:
    """A feature law with correlated features, not the simulator's: a latent bivariate normal with
    correlation ``rho`` whose mean moves by ``shift`` with correctness (fewer violations, more
    confidence when correct; ``shift`` 0 is a null), cut into 5 violation counts (0 for the lowest
    40% of the latent, so about 40% monotone) and 5 confidence levels (1/5 .. 5/5)."""
    from scipy.stats import multivariate_normal, norm

    v_cuts = np.concatenate([[-np.inf], norm.ppf([0.4, 0.6, 0.75, 0.9]), [np.inf]])
    c_cuts = np.concatenate([[-np.inf], norm.ppf([0.2, 0.4, 0.6, 0.8]), [np.inf]])
    rows = []
    for correct, weight in ((True, pi), (False, 1 - pi)):
        sign = -1.0 if correct else 1.0
        law = multivariate_normal(mean=[sign * shift / 2, -sign * shift / 2], cov=[[1.0, rho], [rho, 1.0]])

        def cdf(a: float, b: float) -> float:
            a, b = np.clip(a, -12, 12), np.clip(b, -12, 12)
            return float(law.cdf([a, b]))

        for v in range(5):
            for j in range(5):
                lo1, hi1, lo2, hi2 = v_cuts[v], v_cuts[v + 1], c_cuts[j], c_cuts[j + 1]
                mass = cdf(hi1, hi2) - cdf(lo1, hi2) - cdf(hi1, lo2) + cdf(lo1, lo2)
                rows.append({"violations": v, "final_confidence": (j + 1) / 5, "correct": correct,
                             "mass": weight * max(mass, 0.0)})  # fmt: skip
    frame = pd.DataFrame(rows)
    frame["mass"] /= frame["mass"].sum()
    return frame


def population_baseline(population: pd.DataFrame) -> tuple[float, float]:
    """(coverage, accuracy) of the monotone problems (0 violations) under a feature law."""
    monotone = population[population["violations"] == 0]
    coverage = float(monotone["mass"].sum())
    return coverage, float((monotone["mass"] * monotone["correct"]).sum() / coverage)


def sample_population(population: pd.DataFrame, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """n problems drawn from a feature law (rows of ``population`` by their mass); monotone = 0 violations."""
    mass = population["mass"].to_numpy(dtype=float)
    rows = population.iloc[rng.choice(len(population), size=n, p=mass / mass.sum())]
    return rows.assign(monotone=rows["violations"].to_numpy() == 0).reset_index(drop=True)
