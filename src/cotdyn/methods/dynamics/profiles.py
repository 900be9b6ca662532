"""Traces (one observed trajectory per cell and problem, joined with its record) and the profile table."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.grading.answers import AS_WRITTEN, NO_ANSWER, answer_or_none, equivalent, in_answer_form
from cotdyn.methods.dynamics.mechanisms import mechanism
from cotdyn.methods.dynamics.metrics import dominant_set, trajectory_metrics
from cotdyn.methods.dynamics.states import (
    NULL,
    State,
    checkpoint_positions,
    distributions,
    endpoint_null_shares,
    observed_states,
)
from cotdyn.plan.config import split_cell

# What the profiles read of the records contract (cotdyn.records.contract).
RECORD_COLUMNS = ("cell", "problem_id", "gold", "reference_tokens")


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
    endpoint_null_share: float = math.nan  # share of null samples at the last checkpoint

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
    answer_form: str = AS_WRITTEN,
) -> list[Trace]:
    """Join each (cell, problem) trajectory of ``samples`` with its record, sorted by (cell, problem).

    ``samples`` may hold several cells when it has a ``cell`` column. Every sampled problem needs a
    record (else ValueError); records without samples are skipped. ``outcome`` names the records
    column of realized endpoint correctness (see the package docstring). ``benchmarks`` (cell ->
    benchmark) makes gold dominance use ``answers.equivalent`` under ``equivalence``, and under
    ``answer_form: canonical`` (plan v4) makes each stored answer its canonical class, as the records'
    classes are (``records.table.with_answer_form``); without a benchmark the stored classes stay.
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
        bench = (benchmarks or {}).get(cell)
        if bench and answer_form != AS_WRITTEN:
            frame = _in_answer_form(frame, bench, answer_form)
        dists = distributions(frame, null_class=null_class)
        positions = checkpoint_positions(frame)
        null_last = endpoint_null_shares(frame)
        for pid in sorted(dists):
            rec = by_key.get((cell, str(pid)))
            if rec is None:
                raise ValueError(f"records: no record for cell {cell!r} problem_id {pid!r}")
            gold = answer_or_none(rec["gold"])
            if gold is None or pd.isna(rec[outcome]):
                raise ValueError(f"records: 'gold' or {outcome!r} is null for cell {cell!r} problem_id {pid!r}")
            keep = observed_states(dists[pid])
            classes = {a for k in keep for a in dists[pid][k] if a != NULL}
            golds = (
                frozenset({gold} | {a for a in classes if equivalent(a, gold, bench, equivalence, None, answer_form)})
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
                    endpoint_null_share=null_last[str(pid)],
                )
            )
    return out


def _in_answer_form(samples: pd.DataFrame, benchmark: str, answer_form: str) -> pd.DataFrame:
    """The samples with each answer its class under ``answer_form``; a class the form leaves with no
    answer is ``no_answer`` (states.distributions checks that answer and status agree)."""
    mapped = in_answer_form(samples["answer"], benchmark, answer_form)
    lost = pd.Series([a is None for a in mapped], index=samples.index)
    return samples.assign(answer=mapped, status=samples["status"].mask(lost, NO_ANSWER))


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
    "endpoint_null_share",
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
                "endpoint_null_share": t.endpoint_null_share,
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
    answer_form: str = AS_WRITTEN,
) -> pd.DataFrame:
    """One row per problem with its dynamical profile and mechanism (sections 4.1-4.2).

    Columns: cell, model, task, problem_id, gold, correct (from ``outcome``), reference_tokens,
    n_checkpoints, n_observed, K, S_eff, N_switch, N_return, V, PR, R_direct, t_commit,
    t_commit_index, N_switch_per_step, N_return_per_step, V_per_step, gold_dominant_final,
    endpoint_null_share (``states.endpoint_null_shares``), mechanism, outcome. A problem with no observed checkpoint gets NaN metrics and no mechanism.
    """
    return profiles_from_traces(
        traces(samples, records, null_class, outcome, benchmarks, equivalence, answer_form), tau
    )
