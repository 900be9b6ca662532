"""The simulated model's planted truth, its revision, and the draws keyed by what they decide."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import numpy as np

MISBEHAVIOUR = (
    "unanswered_rate",
    "cut_rate",
    "empty_rate",
    "conflicting_rate",
    "boxed_rate",
    "latex_rate",
    "non_ascii_rate",
    "off_mode_share",
)


@dataclass(frozen=True)
class Planted:
    units_median: float = 6.0
    units_sigma: float = 0.5
    unit_chars: int = 55
    monotone_share: float = 0.6
    accuracy_monotone: float = 0.85
    accuracy_nonmonotone: float = 0.60
    late_switch_share: float = 0.0
    null_rate: float = 0.02
    # misbehaviour (the package docstring); 0 = off
    unanswered_rate: float = 0.0
    cut_rate: float = 0.0
    empty_rate: float = 0.0
    conflicting_rate: float = 0.0
    boxed_rate: float = 0.0
    latex_rate: float = 0.0
    non_ascii_rate: float = 0.0
    # the chain states an answer other than the dominant one of its own continuations (seed 002)
    off_mode_share: float = 0.0

    def __post_init__(self):
        for name in MISBEHAVIOUR:
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"planted {name} must lie in [0, 1], got {getattr(self, name)}")
        if self.unanswered_rate + self.cut_rate > 1:
            raise ValueError("planted unanswered_rate + cut_rate must not exceed 1 (one draw decides both)")


def revision(planted: Planted) -> str:
    """The simulated model's revision: a hash of its planted truth. Misbehaviour rates at 0 are left
    out, so configs written before they existed keep their revision (and their cached generations)."""
    shown = ", ".join(f"{k}={v!r}" for k, v in asdict(planted).items() if not (k in MISBEHAVIOUR and v == 0))
    return "simulated-" + hashlib.sha256(f"Planted({shown})".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class _Latent:
    smooth: bool
    correct: bool
    late_switch: bool
    distinct: tuple[int, ...]  # d_u for u = 0..U-1
    nulls: frozenset[int]
    wrong: str


def _rng(*parts) -> np.random.Generator:
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _uniform(*parts) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (cheaper than a generator, for one draw)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big") / 2**64


def _hit(rate: float, *parts) -> bool:
    """Whether a misbehaviour of this rate happens to the text keyed by ``parts``; no draw at 0."""
    return rate > 0 and _uniform(*parts) < rate
