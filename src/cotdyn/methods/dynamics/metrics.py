"""Per-trajectory metrics of the dynamical profile (seed 002 section 4.1).

``states`` is a list of nonempty states p_0..p_K throughout.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from cotdyn.methods.dynamics.states import TIE_TOL, State, _check_trajectory


def entropy(state: State) -> float:
    """Shannon entropy H(p) in nats (section 3.2)."""
    return -math.fsum(p * math.log(p) for p in state.values() if p > 0)


def dominant_set(state: State) -> frozenset[str]:
    """D_k = argmax_a p_k(a) as a set; answers tied within TIE_TOL are all dominant (section 4.1)."""
    top = max(state.values())
    return frozenset(a for a, p in state.items() if p >= top - TIE_TOL)


def total_variation(p: State, q: State) -> float:
    """TV(p, q) = 1/2 sum_a |p(a) - q(a)| over the union of supports."""
    return 0.5 * sum(abs(p.get(a, 0.0) - q.get(a, 0.0)) for a in set(p) | set(q))


def trajectory_metrics(
    states: Sequence[State], tau: float = 0.8, positions: Sequence[float] | None = None
) -> dict[str, float]:
    """The dynamical profile of one trajectory (section 4.1) and the per-step rates of Table 1:
    S_eff, the mean over checkpoints of exp(H(p_k)); N_switch, the steps whose dominant set changes
    (gaining or losing a co-leader switches); N_return, the entries of an answer into D_k that was
    dominant before; V, the total-variation path length; PR = V^2 / (K sum_k J_k^2) in [1/K, 1]
    (1: movement spread evenly); R_direct = TV(p_0, p_K) / V; t_commit(tau) = k_commit / K, k_commit
    the first k from which some answer holds p >= tau through the end. PR and R_direct are NaN when
    V = 0, t_commit when no answer commits, every per-step rate when K = 0.

    ``t_commit`` is in token-normalised time when ``positions`` are given (section 4.1: k counts
    CoT tokens), else in checkpoint-index time; ``t_commit_index`` is always the index version.
    tau must lie in (0.5, 1], so at most one answer can hold the threshold at a checkpoint.
    """
    _check_tau(tau)
    _check_trajectory(states)
    if positions is not None:
        _check_positions(positions, len(states))
    K = len(states) - 1
    dominant = [dominant_set(s) for s in states]
    steps = step_lengths(states)
    switches, returns, v = _n_switch(dominant), _n_return(dominant), float(steps.sum())
    per_step = (lambda x: x / K) if K > 0 else (lambda x: math.nan)
    return {
        "K": K,
        "S_eff": _effective_support(states),
        "N_switch": switches,
        "N_return": returns,
        "V": v,
        "PR": _participation_ratio(steps),
        "R_direct": _directness(states, steps),
        "t_commit": _commitment_time(states, tau, positions),
        "t_commit_index": _commitment_time(states, tau),
        "N_switch_per_step": per_step(switches),
        "N_return_per_step": per_step(returns),
        "V_per_step": per_step(v),
    }


def _check_tau(tau: float) -> None:
    if not 0.5 < tau <= 1.0:
        raise ValueError(f"tau must lie in (0.5, 1], got {tau}")


def _effective_support(states: Sequence[State]) -> float:
    return float(np.mean([math.exp(entropy(s)) for s in states]))


def _n_switch(dominant: Sequence[frozenset[str]]) -> int:
    return sum(a != b for a, b in zip(dominant, dominant[1:]))


def _n_return(dominant: Sequence[frozenset[str]]) -> int:
    seen: set[str] = set(dominant[0])
    count = 0
    for k in range(1, len(dominant)):
        count += len((dominant[k] - dominant[k - 1]) & seen)
        seen |= dominant[k]
    return count


def step_lengths(states: Sequence[State]) -> np.ndarray:
    """J_k = TV(p_k, p_{k+1}), k = 0..K-1."""
    return np.array([total_variation(a, b) for a, b in zip(states, states[1:])], dtype=float)


def _participation_ratio(steps: np.ndarray) -> float:
    if len(steps) == 0 or steps.sum() <= 0:
        return math.nan
    return float(steps.sum() ** 2 / (len(steps) * (steps**2).sum()))


def _directness(states: Sequence[State], steps: np.ndarray) -> float:
    v = float(steps.sum())
    return total_variation(states[0], states[-1]) / v if v > 0 else math.nan


def _check_positions(positions: Sequence[float], n: int) -> None:
    if len(positions) != n or any(b <= a for a, b in zip(positions, positions[1:])):
        raise ValueError(f"positions must be {n} strictly increasing token counts, got {list(positions)}")


def _commitment_time(states: Sequence[State], tau: float, positions: Sequence[float] | None = None) -> float:
    K = len(states) - 1
    above = [{a for a, p in s.items() if p >= tau - TIE_TOL} for s in states]
    if K == 0 or not above[-1]:
        return math.nan
    k_commit = K
    for answer in above[-1]:
        k = K
        while k > 0 and answer in above[k - 1]:
            k -= 1
        k_commit = min(k_commit, k)
    if positions is None:
        return k_commit / K
    return (positions[k_commit] - positions[0]) / (positions[K] - positions[0])
