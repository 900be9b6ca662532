"""Appendix B's tables over profiles: variance decomposition (Table 1), objective-conditioned
profiles (Table 2), mechanism shares by model (Figure 2)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.methods.dynamics.mechanisms import FAILURE_MECHANISMS, SUCCESS_MECHANISMS

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


# What each endpoint does to the last state a mechanism is read at (docs/reference.md section 9).
ENDPOINT_NOTES = {
    "continuation": "last state sampled from the whole finished chain: its continuations are mostly null "
    "(seed 003 section 5.2), so a finished chain's label at K rests on its few answered samples while a "
    "truncated chain's rests on all; n_null_endpoint counts the labels read off a majority-null last state",
    "chain_answer": "last state's null answers filled with the chain's own answer: a finished chain's "
    "gold dominance at K is mostly its own outcome, fragile_success and stochastic_miss are suppressed",
    "forced": "last state is the chain's own answer: gold dominance at K is the realized outcome, "
    "fragile_success and stochastic_miss cannot occur",
    "reasoning": "last state sampled from the chain cut before its final-answer statement (seed 002 Def. 1)",
}
NULL_ENDPOINT_SHARE = 0.5  # a last checkpoint with more null samples than this is majority-null


def mechanism_shares(profiles: pd.DataFrame, endpoint: str | None = None) -> pd.DataFrame:
    """Share of each success mechanism among correct traces and each failure mechanism among
    incorrect traces, per model, pooled over tasks (Appendix B, Figure 2).

    Traces without a mechanism (no observed checkpoint) are left out. ``accuracy`` is the model's
    pooled endpoint accuracy over the traces counted; rows are ordered by it, highest first, then by
    model name, then in the seed's mechanism order. A model with no correct (incorrect) trace gets
    NaN success (failure) shares. ``n_null_endpoint`` counts the row's traces whose last checkpoint
    was majority null (``endpoint_null_share`` > NULL_ENDPOINT_SHARE; NaN where profiles lack the
    column); ``endpoint`` (the variant's) and its ``endpoint_note`` (ENDPOINT_NOTES) say what the
    endpoint did to the last state every label is read at.
    """
    require_columns(profiles, ("model", "correct", "mechanism"), "profiles")
    labelled = profiles[profiles["mechanism"].notna()]
    null_end = (
        labelled["endpoint_null_share"].to_numpy(dtype=float) > NULL_ENDPOINT_SHARE
        if "endpoint_null_share" in labelled.columns
        else None
    )
    acc = labelled.groupby("model")["correct"].mean().astype(float)
    order = sorted(acc.index, key=lambda m: (-acc[m], m))
    note = ENDPOINT_NOTES.get(endpoint) if endpoint is not None else None
    rows = []
    for model in order:
        in_model = (labelled["model"] == model).to_numpy()
        for outcome, mechs, is_correct in (
            ("success", SUCCESS_MECHANISMS, True),
            ("failure", FAILURE_MECHANISMS, False),
        ):
            in_outcome = in_model & (labelled["correct"] == is_correct).to_numpy()
            n_outcome = int(in_outcome.sum())
            for mech in mechs:
                members = in_outcome & (labelled["mechanism"] == mech).to_numpy()
                count = int(members.sum())
                rows.append(
                    {
                        "model": model,
                        "accuracy": float(acc[model]),
                        "outcome": outcome,
                        "mechanism": mech,
                        "count": count,
                        "n_outcome": n_outcome,
                        "share": count / n_outcome if n_outcome else math.nan,
                        "n_null_endpoint": int((members & null_end).sum()) if null_end is not None else math.nan,
                        "endpoint": endpoint,
                        "endpoint_note": note,
                    }
                )
    columns = ["model", "accuracy", "outcome", "mechanism", "count", "n_outcome", "share", "n_null_endpoint",
               "endpoint", "endpoint_note"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)
