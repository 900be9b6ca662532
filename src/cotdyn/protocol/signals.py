"""The chain-level ranking signals, each declared once (seed 003 Appendix F.1; docs/design.md section 6).

A signal is a column of records.parquet read as a score, oriented so that a higher score means
"more likely correct". Its declaration is the one place that says how it is derived, read, drawn
and named in captions, and whether a registered analysis reads it. The exploratory ranking, the
label coupling, the risk-coverage figure and the captions loop over ``SIGNALS``; the plan-fixed
secondary selective accuracy reads only the signals declared ``registered``, so declaring a new
signal never adds a row to a registered analysis (that takes a new plan version).

To add a signal: declare it here with a ``derive`` (computed per chain from its summarized
trajectory and per-prefix answers when the records are built) and test it; nothing else names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cotdyn.protocol.trajectory import Trajectory

PrefixAnswers = Sequence[Sequence[str | None]]


@dataclass(frozen=True)
class Signal:
    name: str  # the records column, and the signal's name in tables
    higher_is_correct: bool  # False: the column is negated to read as a score
    label: str  # legend text in figures
    phrase: str  # how a caption names it
    color: str
    dash: str | tuple
    # Read by the plan-fixed secondary selective accuracy: plans v1 to v3 fix these four signals.
    registered: bool = False
    # None: a field of the trajectory summary, written by the records table itself.
    derive: Callable[[Trajectory, PrefixAnswers], Any] | None = None

    def score(self, records) -> Any:
        """The signal's score per row of a records frame (higher = predicted correct)."""
        values = records[self.name].to_numpy(dtype=float)
        return values if self.higher_is_correct else -values


def _declare(*signals: Signal) -> dict[str, Signal]:
    return {s.name: s for s in signals}


# Distinct dashes as well as colours: curves that coincide (a small cell) stay distinguishable.
SIGNALS: dict[str, Signal] = _declare(
    Signal("monotone", True, "monotone flag", "the monotone flag", "#4477aa", "-", registered=True),
    Signal("violations", False, "-violations", "-violations", "#228833", (0, (6, 3)), registered=True),
    Signal("final_entropy", False, "-final entropy", "-final entropy", "#ee6677", (0, (1, 2)), registered=True),
    Signal("coherence", True, "coherence C", "coherence C", "#aa3377", (0, (6, 2, 1, 2)), registered=True),
)


def registered_signals() -> list[Signal]:
    """The signals a registered analysis reads (plans v1 to v3: the four of seed 003 Appendix F.2)."""
    return [s for s in SIGNALS.values() if s.registered]


def derived_columns(t: Trajectory, prefix_answers: PrefixAnswers) -> dict[str, Any]:
    """The records columns of the signals that are not fields of the trajectory summary."""
    return {s.name: s.derive(t, prefix_answers) for s in SIGNALS.values() if s.derive is not None}


def caption_list(signals: Sequence[Signal] | None = None) -> str:
    """The signals as a caption names them: "a, b, c and d"."""
    phrases = [s.phrase for s in (SIGNALS.values() if signals is None else signals)]
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
