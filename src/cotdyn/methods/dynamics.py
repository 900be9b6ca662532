"""Answer-distribution trajectories and their dynamical profiles (seed 002).

Seed 002 (Gonzalez i Catala et al., "Answer-Distribution Trajectories") tracks, at each checkpoint
k = 0..K of one reasoning trace, the empirical distribution p_k over parsed final answers of N
sampled continuations (Appendix A.4), and summarises the path (p_0, ..., p_K) by a dynamical
profile (section 4.1): exploration S_eff, revision N_switch / N_return, motion V / PR / R_direct,
commitment t_commit(tau). Orienting the path to the gold answer gives four success and four failure
mechanisms (section 4.2). Appendix B fixes the tables and figures built on top: the variance
decomposition (Table 1), objective-conditioned profiles (Table 2), mechanism shares by model
(Figure 2) and the entropy-profile-matched disagreement curve (Figure 3).

Choices the seed leaves open, taken once here and used everywhere below:

- A "state" is a dict answer -> probability. Unparseable answers are the explicit class ``NULL``
  (Appendix A.1: "mapped to a special null answer category"); with ``null_class=False`` they are
  dropped instead and a checkpoint whose samples are all null becomes the empty state ``{}``.
- Metrics use only checkpoints with a nonempty state (Appendix B, "common trace processing"); K is
  the number of steps between consecutive observed checkpoints, so K = (observed checkpoints) - 1.
- Dominant sets D_k = argmax_a p_k(a) are sets: answers within ``TIE_TOL`` of the maximum are
  co-dominant (ties count as dominant, section 4.2). The null class is an answer like any other: it
  can be dominant, switch, return and commit.
- "Per step" (Table 1: N_switch/step, N_return/step, V/step) divides by K.
- Undefined values are float NaN (never None): PR and R_direct when V = 0 (or K = 0); t_commit when
  no answer holds p >= tau through the last checkpoint, or when K = 0; every "per step" value when
  K = 0. Summaries omit NaN (Appendix B).
- Gold dominance counts an answer class as gold when ``answers.equivalent`` says so under the
  variant's equivalence, as correctness does (``traces`` with the cell's benchmark); without a
  benchmark it compares strings.
- Commitment time is in the seed's token units: t_commit = (tokens at k_commit - tokens at the first
  observed checkpoint) / (tokens at the last - tokens at the first), the time axis of Figure 3;
  ``t_commit_index`` = k_commit / K is the checkpoint-index version.
- "Realized endpoint correctness" (section 4.2, Figure 2) is the trace's own final answer's
  correctness: records column ``chain_correct`` by default. With the registered ``correct`` (the
  majority answer of the last prefix) a fragile success or stochastic miss could only arise through a
  tie or a dominant null class, so that column is available via ``outcome=`` but is not the default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.grading.answers import answer_or_none, answers_or_none, equivalent, is_answered
from cotdyn.plan.config import split_cell

NULL = "<null>"
TIE_TOL = 1e-12  # probabilities are counts / N; the tolerance only absorbs float noise in sums
SUM_TOL = 1e-9

SUCCESS_MECHANISMS = ("stable_success", "rescue", "detour_success", "fragile_success")
FAILURE_MECHANISMS = ("never_discovered", "escape", "failed_rescue", "stochastic_miss")

# The seven trajectory-level metrics of Tables 1-2 (Appendix B), in the seed's column order.
PROFILE_METRICS = (
    "S_eff",
    "N_switch_per_step",
    "N_return_per_step",
    "V_per_step",
    "PR",
    "R_direct",
    "t_commit",
)

SAMPLE_COLUMNS = ("problem_id", "prefix", "sample", "prefix_tokens", "answer", "status")
RECORD_COLUMNS = ("cell", "problem_id", "gold", "reference_tokens")

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


# ---------------------------------------------------------------------------------------------
# Per-trajectory metrics (section 4.1). ``states`` is a list of nonempty states p_0..p_K.


def entropy(state: State) -> float:
    """Shannon entropy H(p) in nats (section 3.2)."""
    return -math.fsum(p * math.log(p) for p in state.values() if p > 0)


def effective_support(states: Sequence[State]) -> float:
    """S_eff: mean over checkpoints of exp(H(p_k)), the effective number of answers (section 4.1)."""
    _check_trajectory(states)
    return _effective_support(states)


def dominant_set(state: State) -> frozenset[str]:
    """D_k = argmax_a p_k(a) as a set; answers tied within TIE_TOL are all dominant (section 4.1)."""
    top = max(state.values())
    return frozenset(a for a, p in state.items() if p >= top - TIE_TOL)


def n_switch(states: Sequence[State]) -> int:
    """N_switch = sum_{k<K} 1[D_{k+1} != D_k], as sets: gaining or losing a co-leader switches."""
    _check_trajectory(states)
    return _n_switch([dominant_set(s) for s in states])


def n_return(states: Sequence[State]) -> int:
    """N_return = sum_a #{k in 1..K: a in D_k, a not in D_{k-1}, a in D_j for some j < k}."""
    _check_trajectory(states)
    return _n_return([dominant_set(s) for s in states])


def total_variation(p: State, q: State) -> float:
    """TV(p, q) = 1/2 sum_a |p(a) - q(a)| over the union of supports."""
    return 0.5 * sum(abs(p.get(a, 0.0) - q.get(a, 0.0)) for a in set(p) | set(q))


def step_lengths(states: Sequence[State]) -> np.ndarray:
    """J_k = TV(p_k, p_{k+1}), k = 0..K-1."""
    _check_trajectory(states)
    return _step_lengths(states)


def path_length(states: Sequence[State]) -> float:
    """V = sum_k J_k, the total-variation path length (section 4.1)."""
    return float(step_lengths(states).sum())


def participation_ratio(states: Sequence[State]) -> float:
    """PR = (sum_k J_k)^2 / (K sum_k J_k^2), in [1/K, 1]; 1 = movement spread evenly over steps.

    NaN when V = 0 (no movement to distribute) or K = 0.
    """
    return _participation_ratio(step_lengths(states))


def directness(states: Sequence[State]) -> float:
    """R_direct = TV(p_0, p_K) / V, in [0, 1]; NaN when V = 0 (Appendix B: undefined, omitted)."""
    return _directness(states, step_lengths(states))


def commitment_time(states: Sequence[State], tau: float = 0.8, positions: Sequence[float] | None = None) -> float:
    """t_commit(tau) = k_commit / K, k_commit = min{k: some a has p_j(a) >= tau for all j >= k}.

    With ``positions`` (token counts of the checkpoints) time is in the seed's token units:
    (positions[k_commit] - positions[0]) / (positions[K] - positions[0]); without, checkpoint-index
    units. NaN when no answer holds p >= tau through the last checkpoint, and when K = 0 (0/0). tau
    must lie in (0.5, 1], so at most one answer can hold the threshold at a checkpoint.
    """
    _check_tau(tau)
    _check_trajectory(states)
    if positions is not None:
        _check_positions(positions, len(states))
    return _commitment_time(states, tau, positions)


def trajectory_metrics(
    states: Sequence[State], tau: float = 0.8, positions: Sequence[float] | None = None
) -> dict[str, float]:
    """The dynamical profile of one trajectory: raw metrics and the per-step rates of Table 1.

    ``t_commit`` is in token-normalised time when ``positions`` are given (section 4.1: k counts
    CoT tokens), else in checkpoint-index time; ``t_commit_index`` is always the index version.
    """
    _check_tau(tau)
    _check_trajectory(states)
    if positions is not None:
        _check_positions(positions, len(states))
    K = len(states) - 1
    dominant = [dominant_set(s) for s in states]
    steps = _step_lengths(states)
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


# Kernels over validated input: trajectory_metrics validates once, then shares dominant sets and steps.


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


def _step_lengths(states: Sequence[State]) -> np.ndarray:
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


# ---------------------------------------------------------------------------------------------
# Mechanisms of success and failure (section 4.2, Appendix B Figure 2)


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


# ---------------------------------------------------------------------------------------------
# Traces: one observed trajectory per (cell, problem), joined with its record


@dataclass(frozen=True)
class Trace:
    """One observed answer-distribution trajectory with what the analyses need from its record."""

    cell: str
    model: str
    task: str
    problem_id: str
    positions: tuple[int, ...]  # prefix tokens of the observed (nonempty) checkpoints
    states: tuple[State, ...]  # nonempty states only
    n_checkpoints: int  # all checkpoints, empty ones included
    gold: str
    correct: bool
    reference_tokens: float
    gold_classes: frozenset[str] = frozenset()  # classes equivalent to gold; empty = the gold string

    @property
    def golds(self) -> frozenset[str]:
        return self.gold_classes or frozenset({self.gold})


def _split_samples(samples: pd.DataFrame, cells: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    if "cell" in samples.columns:
        return [(str(c), g) for c, g in samples.groupby("cell", sort=True)]
    if len(cells) != 1:
        raise ValueError(
            f"samples: no 'cell' column, but records hold {len(cells)} cells {sorted(cells)}; "
            "add a 'cell' column to samples"
        )
    return [(cells[0], samples)]


def traces(
    samples: pd.DataFrame,
    records: pd.DataFrame,
    null_class: bool = True,
    outcome: str = "chain_correct",
    benchmarks: dict[str, str] | None = None,
    equivalence: str = "normalized",
) -> list[Trace]:
    """Join each (cell, problem) trajectory of ``samples`` with its record, sorted by (cell, problem).

    ``samples`` may hold several cells when it has a ``cell`` column. Every sampled problem needs a
    record (else ValueError); records without samples are skipped. ``outcome`` names the records
    column of realized endpoint correctness (see module docstring). ``benchmarks`` (cell ->
    benchmark) makes gold dominance use ``answers.equivalent`` under ``equivalence``.
    """
    require_columns(records, (*RECORD_COLUMNS, outcome), "records")
    dup = records.duplicated(["cell", "problem_id"])
    if dup.any():
        row = records.loc[dup].iloc[0]
        raise ValueError(f"records: duplicate (cell, problem_id) = ({row['cell']!r}, {row['problem_id']!r})")
    by_key = {(str(r["cell"]), str(r["problem_id"])): r for r in records.to_dict("records")}
    out: list[Trace] = []
    for cell, frame in _split_samples(samples, sorted(records["cell"].astype(str).unique())):
        model, task = split_cell(cell)
        dists = distributions(frame, null_class=null_class)
        positions = checkpoint_positions(frame)
        for pid in sorted(dists):
            rec = by_key.get((cell, str(pid)))
            if rec is None:
                raise ValueError(f"records: no record for cell {cell!r} problem_id {pid!r}")
            gold = answer_or_none(rec["gold"])
            if gold is None or pd.isna(rec[outcome]):
                raise ValueError(f"records: 'gold' or {outcome!r} is null for cell {cell!r} problem_id {pid!r}")
            keep = observed_states(dists[pid])
            bench = (benchmarks or {}).get(cell)
            classes = {a for k in keep for a in dists[pid][k] if a != NULL}
            golds = (
                frozenset({gold} | {a for a in classes if equivalent(a, gold, bench, equivalence)})
                if bench
                else frozenset()
            )
            out.append(
                Trace(
                    cell=cell,
                    model=model,
                    task=task,
                    problem_id=str(pid),
                    positions=tuple(positions[pid][k] for k in keep),
                    states=tuple(dists[pid][k] for k in keep),
                    n_checkpoints=len(dists[pid]),
                    gold=gold,
                    correct=bool(rec[outcome]),
                    reference_tokens=float(rec["reference_tokens"]),
                    gold_classes=golds,
                )
            )
    return out


_UNDEFINED_METRICS = {
    "K": math.nan,
    "S_eff": math.nan,
    "N_switch": math.nan,
    "N_return": math.nan,
    "V": math.nan,
    "PR": math.nan,
    "R_direct": math.nan,
    "t_commit": math.nan,
    "t_commit_index": math.nan,
    "N_switch_per_step": math.nan,
    "N_return_per_step": math.nan,
    "V_per_step": math.nan,
}


def trace_mechanism(trace: Trace) -> str | None:
    """The trace's mechanism, or None when it has no observed checkpoint."""
    return mechanism(trace.states, trace.gold, trace.correct, trace.golds) if trace.states else None


PROFILE_COLUMNS = (
    "cell",
    "model",
    "task",
    "problem_id",
    "gold",
    "correct",
    "reference_tokens",
    "n_checkpoints",
    "n_observed",
    *_UNDEFINED_METRICS,
    "gold_dominant_final",
    "mechanism",
    "outcome",
)


def profiles_from_traces(trace_list: Sequence[Trace], tau: float = 0.8) -> pd.DataFrame:
    """One row per trace: identifiers, record fields, every section 4.1 metric and the mechanism."""
    rows = []
    for t in trace_list:
        metrics = trajectory_metrics(t.states, tau, t.positions) if t.states else dict(_UNDEFINED_METRICS)
        mech = trace_mechanism(t)
        rows.append(
            {
                "cell": t.cell,
                "model": t.model,
                "task": t.task,
                "problem_id": t.problem_id,
                "gold": t.gold,
                "correct": t.correct,
                "reference_tokens": t.reference_tokens,
                "n_checkpoints": t.n_checkpoints,
                "n_observed": len(t.states),
                **metrics,
                "gold_dominant_final": bool(t.golds & dominant_set(t.states[-1])) if t.states else None,
                "mechanism": mech,
                "outcome": None if mech is None else ("success" if t.correct else "failure"),
            }
        )
    return pd.DataFrame(rows, columns=list(PROFILE_COLUMNS))


def profile_table(
    samples: pd.DataFrame,
    records: pd.DataFrame,
    null_class: bool = True,
    tau: float = 0.8,
    outcome: str = "chain_correct",
    benchmarks: dict[str, str] | None = None,
    equivalence: str = "normalized",
) -> pd.DataFrame:
    """One row per problem with its dynamical profile and mechanism (sections 4.1-4.2).

    Columns: cell, model, task, problem_id, gold, correct (from ``outcome``), reference_tokens,
    n_checkpoints, n_observed, K, S_eff, N_switch, N_return, V, PR, R_direct, t_commit,
    t_commit_index, N_switch_per_step, N_return_per_step, V_per_step, gold_dominant_final,
    mechanism, outcome. A problem with no observed checkpoint gets NaN metrics and no mechanism.
    """
    return profiles_from_traces(traces(samples, records, null_class, outcome, benchmarks, equivalence), tau)


# ---------------------------------------------------------------------------------------------
# Table 1: variance decomposition (Appendix B)


def variance_decomposition(profiles: pd.DataFrame, metrics: Sequence[str] = PROFILE_METRICS) -> pd.DataFrame:
    """Root variance components of each metric: model, task, model x task, within, total.

    Equal weight per model-task cell (Appendix B): with cell means mu_mt, marginal means mu_m., mu_.t
    and grand mean mu over cells, sigma2_model = mean_m (mu_m. - mu)^2, sigma2_task = mean_t
    (mu_.t - mu)^2, sigma2_interaction = mean_mt (mu_mt - mu_m. - mu_.t + mu)^2, sigma2_within =
    mean_mt Var_pop(X | m, t); total^2 is their sum. Undefined (NaN) values are omitted. The
    identity needs the full model x task grid: a metric with an empty cell gets NaN components and
    ``complete_grid`` False.
    """
    require_columns(profiles, ("model", "task", *metrics), "profiles")
    models = sorted(profiles["model"].unique())
    tasks = sorted(profiles["task"].unique())
    rows = []
    for metric in metrics:
        x = profiles[["model", "task", metric]].dropna()
        grouped = x.groupby(["model", "task"])[metric]
        mean = grouped.mean().unstack("task").reindex(index=models, columns=tasks)
        within = grouped.var(ddof=0).unstack("task").reindex(index=models, columns=tasks)
        complete = bool(mean.notna().all().all()) and len(models) > 0 and len(tasks) > 0
        row = {
            "metric": metric,
            "n_traces": len(x),
            "n_models": len(models),
            "n_tasks": len(tasks),
            "complete_grid": complete,
        }
        if complete:
            mu = mean.to_numpy()
            grand = mu.mean()
            m_dot, t_dot = mu.mean(axis=1), mu.mean(axis=0)
            comps = {
                "model": np.mean((m_dot - grand) ** 2),
                "task": np.mean((t_dot - grand) ** 2),
                "model_x_task": np.mean((mu - m_dot[:, None] - t_dot[None, :] + grand) ** 2),
                "within": np.nanmean(within.to_numpy()),
            }
            comps["total"] = sum(comps.values())
        else:
            comps = dict.fromkeys(("model", "task", "model_x_task", "within", "total"), math.nan)
        row.update({k: float(np.sqrt(v)) for k, v in comps.items()})
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Table 2: objective-conditioned profiles (Appendix B)


def condition_means(profiles: pd.DataFrame, metrics: Sequence[str] = PROFILE_METRICS) -> pd.DataFrame:
    """One row per model-task condition: accuracy, mean CoT length, and each metric's mean.

    CoT length is ``reference_tokens`` (the chain's generated tokens); metric means omit NaN.
    """
    require_columns(profiles, ("model", "task", "correct", "reference_tokens", *metrics), "profiles")
    g = profiles.groupby(["model", "task"], sort=True)
    out = g[list(metrics)].mean()
    out.insert(0, "accuracy", g["correct"].mean().astype(float))
    out.insert(1, "cot_length", g["reference_tokens"].mean().astype(float))
    out.insert(0, "n_traces", g.size())
    return out.reset_index()


def _zscore_within_task(values: pd.Series, task: pd.Series) -> pd.Series:
    """(x - task mean) / task population SD; 0 where a task has no spread (every condition at its mean)."""
    grouped = values.groupby(task)
    mu, sd = grouped.transform("mean"), grouped.transform(lambda s: s.std(ddof=0))
    z = (values - mu) / sd
    return z.where(sd > 0, 0.0).where(values.notna())


def objective_profiles(
    profiles: pd.DataFrame, metrics: Sequence[str] = PROFILE_METRICS, share: float = 0.25
) -> pd.DataFrame:
    """Table 2: mean within-task-standardized profile of the high-accuracy and short-CoT conditions.

    Conditions (model-task means) are standardized within each task across models with population
    SD; CoT length is log-transformed first. "High accuracy" is the ceil(share * n) conditions with
    the largest standardized accuracy, "short CoT" the ceil(share * n) with the smallest standardized
    log CoT length; ties are broken by (model, task) order. Entries: the group's mean standardized
    metrics (NaN omitted), plus its unstandardized mean accuracy and mean CoT length.
    """
    cond = condition_means(profiles, metrics)
    z = pd.DataFrame({"model": cond["model"], "task": cond["task"]})
    z["accuracy"] = _zscore_within_task(cond["accuracy"], cond["task"])
    z["log_cot_length"] = _zscore_within_task(np.log(cond["cot_length"]), cond["task"])
    for m in metrics:
        z[m] = _zscore_within_task(cond[m], cond["task"])
    n_pick = max(1, math.ceil(share * len(cond)))
    picks = {
        "high_accuracy": z.sort_values(
            ["accuracy", "model", "task"], ascending=[False, True, True], kind="mergesort"
        ).index[:n_pick],
        "short_cot": z.sort_values(["log_cot_length", "model", "task"], kind="mergesort").index[:n_pick],
    }
    rows = []
    for objective, idx in picks.items():
        rows.append(
            {
                "objective": objective,
                "n_conditions": len(idx),
                "conditions": ";".join(f"{cond.at[i, 'model']}-{cond.at[i, 'task']}" for i in sorted(idx)),
                **{m: float(z.loc[idx, m].mean()) for m in metrics},
                "accuracy": float(cond.loc[idx, "accuracy"].mean()),
                "cot_length": float(cond.loc[idx, "cot_length"].mean()),
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Figure 2: mechanism shares by model


def mechanism_shares(profiles: pd.DataFrame) -> pd.DataFrame:
    """Share of each success mechanism among correct traces and each failure mechanism among
    incorrect traces, per model, pooled over tasks (Appendix B, Figure 2).

    Traces without a mechanism (no observed checkpoint) are left out. ``accuracy`` is the model's
    pooled endpoint accuracy over the traces counted; rows are ordered by it, highest first, then by
    model name, then in the seed's mechanism order. A model with no correct (incorrect) trace gets
    NaN success (failure) shares.
    """
    require_columns(profiles, ("model", "correct", "mechanism"), "profiles")
    labelled = profiles[profiles["mechanism"].notna()]
    acc = labelled.groupby("model")["correct"].mean().astype(float)
    order = sorted(acc.index, key=lambda m: (-acc[m], m))
    rows = []
    for model in order:
        frame = labelled[labelled["model"] == model]
        for outcome, mechs, is_correct in (
            ("success", SUCCESS_MECHANISMS, True),
            ("failure", FAILURE_MECHANISMS, False),
        ):
            sub = frame[frame["correct"] == is_correct]
            for mech in mechs:
                count = int((sub["mechanism"] == mech).sum())
                rows.append(
                    {
                        "model": model,
                        "accuracy": float(acc[model]),
                        "outcome": outcome,
                        "mechanism": mech,
                        "count": count,
                        "n_outcome": len(sub),
                        "share": count / len(sub) if len(sub) else math.nan,
                    }
                )
    return pd.DataFrame(rows, columns=["model", "accuracy", "outcome", "mechanism", "count", "n_outcome", "share"])


# ---------------------------------------------------------------------------------------------
# Figure 3: disagreement among entropy-profile-matched cross-model pairs (Appendix B)

GRID = np.linspace(0.0, 1.0, 101)


@dataclass(frozen=True)
class NormalizedProfile:
    """A trace on the normalized-time grid: entropy, dominant set and gold dominance at each point."""

    entropy: np.ndarray
    dominant: tuple[frozenset[str], ...]
    gold_dominant: np.ndarray


def normalized_profile(trace: Trace, grid: np.ndarray = GRID) -> NormalizedProfile:
    """Rescale the trace's token positions to [0, 1] and read it on ``grid``.

    Time is (tokens - first) / (last - first) over the observed checkpoints, so every trace spans
    [0, 1]; a single-checkpoint trace is constant. Entropy is linearly interpolated; the dominant set
    and gold dominance come from the most recent observed checkpoint at or before each grid point.
    """
    if not trace.states:
        raise ValueError(f"trace {trace.cell}/{trace.problem_id} has no observed checkpoint")
    pos = np.asarray(trace.positions, dtype=float)
    span = pos[-1] - pos[0]
    t = (pos - pos[0]) / span if span > 0 else np.zeros_like(pos)
    h = np.array([entropy(s) for s in trace.states])
    last = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)
    dom = [dominant_set(s) for s in trace.states]
    return NormalizedProfile(
        entropy=np.interp(grid, t, h),
        dominant=tuple(dom[i] for i in last),
        gold_dominant=np.array([bool(trace.golds & dom[i]) for i in last]),
    )


def disagreement_pairs(trace_list: Sequence[Trace], grid: np.ndarray = GRID) -> pd.DataFrame:
    """Every cross-model pair of traces of the same (task, problem): entropy-profile RMSE and three
    disagreements (Appendix B, Figure 3).

    ``dominant_set`` and ``gold_dominance`` are the fractions of grid points where the two differ;
    ``mechanism`` is 1.0 / 0.0 when both traces have the same realized outcome and a mechanism, else
    NaN (not evaluated). Pairs are listed in (task, problem_id, model_a, model_b) order.
    """
    by_item: dict[tuple[str, str], list[Trace]] = {}
    for t in trace_list:
        if t.states:
            by_item.setdefault((t.task, t.problem_id), []).append(t)
    rows = []
    for task, pid in sorted(by_item):
        group = sorted(by_item[(task, pid)], key=lambda t: t.model)
        prof = {t.model: normalized_profile(t, grid) for t in group}
        mech = {t.model: trace_mechanism(t) for t in group}
        for a, b in combinations(group, 2):
            if a.model == b.model:
                raise ValueError(f"two traces of model {a.model!r} for task {task!r} problem {pid!r}")
            pa, pb = prof[a.model], prof[b.model]
            same_outcome = a.correct == b.correct  # both have a mechanism: their states are nonempty
            rows.append(
                {
                    "task": task,
                    "problem_id": pid,
                    "model_a": a.model,
                    "model_b": b.model,
                    "rmse": float(np.sqrt(np.mean((pa.entropy - pb.entropy) ** 2))),
                    "dominant_set": float(np.mean([x != y for x, y in zip(pa.dominant, pb.dominant)])),
                    "gold_dominance": float(np.mean(pa.gold_dominant != pb.gold_dominant)),
                    "mechanism": float(mech[a.model] != mech[b.model]) if same_outcome else math.nan,
                }
            )
    return pd.DataFrame(
        rows,
        columns=["task", "problem_id", "model_a", "model_b", "rmse", "dominant_set", "gold_dominance", "mechanism"],
    )


def disagreement_curve(
    pairs: pd.DataFrame, bin_width: float = 0.01, max_rmse: float = 0.20, exact_tol: float = 1e-12
) -> pd.DataFrame:
    """Mean disagreement (%) per entropy-profile RMSE bin (Appendix B, Figure 3).

    Exact matches (RMSE <= exact_tol) form a row at 0; the rest fall in right-closed bins
    (0, w], (w, 2w], ..., up to max_rmse; pairs above max_rmse are not shown. Every bin is listed,
    empty ones with n_pairs 0 and NaN percentages. Mechanism disagreement averages only the pairs
    where it was evaluated (``n_mechanism_pairs``).
    """
    require_columns(pairs, ("rmse", "dominant_set", "gold_dominance", "mechanism"), "pairs")
    n_bins = int(round(max_rmse / bin_width))
    edges = np.round(np.arange(n_bins + 1) * bin_width, 12)
    rmse = pairs["rmse"].to_numpy()
    exact = rmse <= exact_tol
    # right=True: edges[i-1] < x <= edges[i] -> i, so bin i-1 is (edges[i-1], edges[i]]
    index = np.digitize(rmse, edges, right=True) - 1
    groups = [("exact", 0.0, 0.0, exact)]
    groups += [(f"bin{i:02d}", edges[i], edges[i + 1], ~exact & (index == i)) for i in range(n_bins)]
    rows = []
    for name, lo, hi, mask in groups:
        sub = pairs[mask]
        mech = sub["mechanism"].dropna()
        rows.append(
            {
                "bin": name,
                "rmse_lo": float(lo),
                "rmse_hi": float(hi),
                "rmse_mid": float((lo + hi) / 2),
                "n_pairs": len(sub),
                "dominant_set_pct": 100 * float(sub["dominant_set"].mean()) if len(sub) else math.nan,
                "gold_dominance_pct": 100 * float(sub["gold_dominance"].mean()) if len(sub) else math.nan,
                "n_mechanism_pairs": len(mech),
                "mechanism_pct": 100 * float(mech.mean()) if len(mech) else math.nan,
            }
        )
    return pd.DataFrame(rows)
