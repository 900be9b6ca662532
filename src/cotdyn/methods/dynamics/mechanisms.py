"""Mechanisms of success and failure: the path oriented to the gold answer (seed 002 section 4.2)."""

from __future__ import annotations

from typing import Sequence

from cotdyn.methods.dynamics.metrics import dominant_set
from cotdyn.methods.dynamics.states import State, _check_trajectory

SUCCESS_MECHANISMS = ("stable_success", "rescue", "detour_success", "fragile_success")
FAILURE_MECHANISMS = ("never_discovered", "escape", "failed_rescue", "stochastic_miss")


def gold_dominance(states: Sequence[State], gold: str, gold_classes: frozenset[str] | None = None) -> list[bool]:
    """g_k = gold in D_k, ties included (section 4.2).

    ``gold_classes`` are the answer classes that count as gold (those ``answers.equivalent`` to it);
    by default the gold string alone.
    """
    _check_trajectory(states)
    golds = gold_classes or frozenset({gold})
    return [bool(dominant_set(s) & golds) for s in states]


def mechanism(states: Sequence[State], gold: str, correct: bool, gold_classes: frozenset[str] | None = None) -> str:
    """The success (correct) or failure (incorrect) mechanism of a trajectory (section 4.2).

    Success: stable (gold dominant at every checkpoint), rescue (not at 0, at K), detour (at 0 and
    K, lost in between), fragile (correct yet gold not dominant at K). Failure: never discovered
    (gold never dominant), escape (at 0, not at K), failed rescue (not at 0, dominant somewhere in
    between, not at K), stochastic miss (incorrect yet gold dominant at K). Each set of four
    partitions its outcome, so every trace gets exactly one label.
    """
    g = gold_dominance(states, gold, gold_classes)
    if correct:
        if not g[-1]:
            return "fragile_success"
        if not g[0]:
            return "rescue"
        return "stable_success" if all(g) else "detour_success"
    if g[-1]:
        return "stochastic_miss"
    if g[0]:
        return "escape"
    return "failed_rescue" if any(g) else "never_discovered"
