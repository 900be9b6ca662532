"""Figures and tables of seed 002 (answer-distribution trajectories), and the one function that writes them.

Figures are built on ``matplotlib.figure.Figure`` (Agg canvas, no pyplot state) and saved with a
fixed dpi and no Software metadata, so the same data give the same PNG bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.files.writers import new_figure, write_csv, write_png
from cotdyn.methods import dynamics as dyn
from cotdyn.report.figures import nothing_to_draw

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# An answer or id drawn in a figure is cut to this many characters, saying so: an answer is a few
# characters, but a continuation's text is the model's (a 1 MB "answer" took a minute to lay out).
LABEL_CHARS = 60


def shortened(text) -> str:
    """An answer or id as a figure draws it: cut to LABEL_CHARS (named where cut), and its dollar
    signs escaped, so matplotlib draws them rather than parse what lies between as mathtext (a
    model's ``$\\frac{1$`` stopped the figure with a parse error)."""
    text = str(text)
    if len(text) > LABEL_CHARS:
        text = f"{text[:LABEL_CHARS]}... ({len(text)} characters, cut to LABEL_CHARS = {LABEL_CHARS})"
    return text.replace("$", r"\$")


MECHANISM_COLORS = {
    "stable_success": "#1b7837",
    "rescue": "#7fbf7b",
    "detour_success": "#d9f0d3",
    "fragile_success": "#c2a5cf",
    "never_discovered": "#b2182b",
    "escape": "#ef8a62",
    "failed_rescue": "#fddbc7",
    "stochastic_miss": "#67a9cf",
}
ANSWER_COLORS = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb")
NULL_COLOR = "#444444"
OTHER_COLOR = "#dddddd"


# ---------------------------------------------------------------------------------------------
# Figure 1: answer-distribution trajectories


def _answer_order(trace: dyn.Trace, max_answers: int) -> list[str]:
    """Non-null answers by peak probability (then name); the rest pooled as 'other'."""
    peak: dict[str, float] = {}
    for state in trace.states:
        for a, p in state.items():
            if a != dyn.NULL:
                peak[a] = max(peak.get(a, 0.0), p)
    return sorted(peak, key=lambda a: (-peak[a], a))[:max_answers]


def trajectory_figure(trace_list: Sequence[dyn.Trace], max_answers: int = 6, ncols: int = 2) -> Figure:
    """Stacked probability of each answer over token checkpoints, one panel per trace (seed 002 Fig. 1).

    Shown: the ``max_answers`` answers with the highest peak probability, the null class in dark
    grey, everything else pooled as 'other'. The gold answer is labelled; the title gives the cell,
    problem and mechanism.
    """
    if not trace_list:
        raise ValueError("trajectory_figure: no traces to draw")
    n = len(trace_list)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    width, height = 6.5 * ncols, 3.0 * nrows
    fig = new_figure(figsize=(width, height))
    # fixed margins in inches (constrained layout costs seconds per figure): room for the legends
    fig.subplots_adjust(
        left=0.7 / width,
        right=1 - 1.6 / width,
        bottom=0.6 / height,
        top=1 - 0.4 / height,
        wspace=2.2 / 4.2,
        hspace=1.0 / 2.0,
    )
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, trace in zip(axes, trace_list):
        answers = _answer_order(trace, max_answers)
        x = np.asarray(trace.positions, dtype=float)
        layers, labels, colors = [], [], []
        for i, a in enumerate(answers):
            layers.append([s.get(a, 0.0) for s in trace.states])
            labels.append(f"{shortened(a)} (gold)" if a in trace.golds else shortened(a))
            colors.append(ANSWER_COLORS[i % len(ANSWER_COLORS)])
        other = [1.0 - sum(s.get(a, 0.0) for a in answers) - s.get(dyn.NULL, 0.0) for s in trace.states]
        if max(other) > 1e-12:
            layers.append(other), labels.append("other"), colors.append(OTHER_COLOR)
        if any(dyn.NULL in s for s in trace.states):
            layers.append([s.get(dyn.NULL, 0.0) for s in trace.states])
            labels.append("null"), colors.append(NULL_COLOR)
        ax.stackplot(x, np.clip(np.array(layers), 0, 1), labels=labels, colors=colors, step=None)
        ax.set_xlim(x[0], x[-1] if x[-1] > x[0] else x[0] + 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("CoT tokens (checkpoint)")
        ax.set_ylabel("probability")
        mechanism = dyn.trace_mechanism(trace) or "unlabelled"
        ax.set_title(f"{shortened(trace.cell)} / {shortened(trace.problem_id)}: {mechanism}", fontsize=9)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    for ax in axes[n:]:
        ax.set_axis_off()
    return fig


def example_traces(trace_list: Sequence[dyn.Trace], per_mechanism: int = 1) -> list[dyn.Trace]:
    """Deterministic examples for Figure 1: the first ``per_mechanism`` traces (by cell, problem) of
    each mechanism that occurs, in the seed's mechanism order."""
    by_mechanism: dict[str, list[dyn.Trace]] = {}
    for t in sorted(trace_list, key=lambda t: (t.cell, t.problem_id)):
        mech = dyn.trace_mechanism(t)
        if mech is not None:
            by_mechanism.setdefault(mech, []).append(t)
    return [
        t
        for mech in (*dyn.SUCCESS_MECHANISMS, *dyn.FAILURE_MECHANISMS)
        for t in by_mechanism.get(mech, [])[:per_mechanism]
    ]


# ---------------------------------------------------------------------------------------------
# Figure 2: mechanism shares


def mechanism_figure(shares: pd.DataFrame) -> Figure:
    """Horizontal stacked bars per model: success mechanisms among correct traces (left) and failure
    mechanisms among incorrect traces (right), rows sorted by pooled accuracy (seed 002 Fig. 2)."""
    require_columns(shares, ("model", "accuracy", "outcome", "mechanism", "share"), "shares")
    models = list(dict.fromkeys(shares["model"]))  # already ordered by accuracy
    bars_in = 0.4 * max(len(models), 1)  # axes height in inches
    height = bars_in + 1.5
    fig = new_figure(figsize=(12, height))
    # fixed margins in inches; each panel has its own tick labels (accuracy left, failure rate right)
    fig.subplots_adjust(left=0.16, right=0.98, bottom=1.1 / height, top=1 - 0.4 / height, wspace=0.45)
    axes = fig.subplots(1, 2)
    for ax, outcome, mechs in (
        (axes[0], "success", dyn.SUCCESS_MECHANISMS),
        (axes[1], "failure", dyn.FAILURE_MECHANISMS),
    ):
        sub = shares[shares["outcome"] == outcome]
        y = np.arange(len(models))[::-1]
        left = np.zeros(len(models))
        for mech in mechs:
            share = sub[sub["mechanism"] == mech].set_index("model")["share"].reindex(models).fillna(0.0).to_numpy()
            ax.barh(
                y,
                100 * share,
                left=left,
                color=MECHANISM_COLORS[mech],
                label=mech.replace("_", " "),
                edgecolor="white",
                linewidth=0.5,
            )
            left += 100 * share
        acc = shares.drop_duplicates("model").set_index("model")["accuracy"].reindex(models).to_numpy()
        rate = acc if outcome == "success" else 1 - acc
        ax.set_yticks(y, [f"{m} ({100 * r:.1f}%)" for m, r in zip(models, rate)])
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"% of {'correct' if outcome == 'success' else 'incorrect'} traces")
        ax.set_title(f"{outcome.capitalize()} mechanisms", fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.55 / bars_in), ncol=2, frameon=False)
    return fig


# ---------------------------------------------------------------------------------------------
# Figure 3: disagreement vs entropy-profile RMSE

DISAGREEMENTS = (
    ("dominant_set_pct", "Dominant answer set"),
    ("gold_dominance_pct", "Gold dominance"),
    ("mechanism_pct", "Success/failure mechanism"),
)


def disagreement_figure(curve: pd.DataFrame) -> Figure:
    """Mean disagreement (%) per RMSE bin, exact matches as open squares at 0 (seed 002 Fig. 3)."""
    require_columns(curve, ("rmse_mid", *(c for c, _ in DISAGREEMENTS)), "curve")
    fig = new_figure(figsize=(6, 3.5))
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.15, top=0.9)
    ax = fig.subplots()
    exact = curve["rmse_hi"] <= 0  # exact matches are reported apart from the binned curve
    for (column, label), color in zip(DISAGREEMENTS, ("#4477aa", "#ee6677", "#228833")):
        ax.plot(
            curve.loc[~exact, "rmse_mid"], curve.loc[~exact, column], marker="o", markersize=3, color=color, label=label
        )
        ax.plot(
            curve.loc[exact, "rmse_mid"],
            curve.loc[exact, column],
            marker="s",
            markersize=5,
            linestyle="none",
            markerfacecolor="none",
            color=color,
        )
    ax.set_xlabel("Entropy-profile RMSE (nats)")
    ax.set_ylabel("Disagreement (%)")
    ax.set_title("Answer disagreement between chains by entropy-profile distance", fontsize=10)
    if curve[[c for c, _ in DISAGREEMENTS]].isna().all().all():  # no bin holds a pair
        ax.text(0.5, 0.5, "nothing to draw: no pairs of chains to compare", ha="center", va="center", fontsize=9,
                color="0.3", transform=ax.transAxes)  # fmt: skip
        ax.set_xticks([]), ax.set_yticks([])  # an empty scale would read as measured zeros
        return fig
    ax.set_xlim(-0.005, float(curve["rmse_hi"].max()) + 0.005)
    ax.legend(fontsize=8, frameon=False)
    return fig


# ---------------------------------------------------------------------------------------------
# Writing


def write_dynamics(
    samples: pd.DataFrame,
    records: pd.DataFrame,
    out_dir: str | Path,
    *,
    null_class: bool = True,
    tau: float = 0.8,
    outcome: str = "chain_correct",
    examples: Sequence[tuple[str, str]] | None = None,
    benchmarks: dict[str, str] | None = None,
    equivalence: str = "normalized",
    endpoint: str | None = None,
    answer_form: str = "as_written",
) -> list[Path]:
    """Compute every seed 002 table and figure from samples + records and write them to ``out_dir``.

    ``samples`` may hold several cells when it has a ``cell`` column (Figure 3 and Tables 1-2 need
    several models). ``examples`` lists the (cell, problem_id) traces of Figure 1; by default one
    per occurring mechanism. Returns the written paths: profiles.csv, variance_decomposition.csv,
    objective_profiles.csv, mechanism_shares.csv, disagreement_pairs.csv, disagreement_curve.csv,
    disagreement.png, mechanism_shares.png and trajectories.png (a figure with nothing to draw
    says so in its title). ``benchmarks`` (cell -> benchmark) and ``equivalence`` decide which
    answer classes count as gold, as correctness does, and ``answer_form`` (the variant's) which
    spellings are one class (``dynamics.traces``); ``endpoint`` (the variant's) is noted in
    mechanism_shares.csv (``dynamics.mechanism_shares``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trace_list = dyn.traces(samples, records, null_class, outcome, benchmarks, equivalence, answer_form)
    profiles = dyn.profiles_from_traces(trace_list, tau)
    shares = dyn.mechanism_shares(profiles, endpoint)
    pairs = dyn.disagreement_pairs(trace_list)
    curve = dyn.disagreement_curve(pairs)
    if examples is None:
        chosen = example_traces(trace_list)
    else:
        by_key = {(t.cell, t.problem_id): t for t in trace_list}
        missing = [k for k in examples if k not in by_key]
        if missing:
            raise ValueError(f"examples: no trace for (cell, problem_id) {missing}")
        chosen = [by_key[k] for k in examples]
    paths = [
        write_csv(profiles, out / "profiles.csv"),
        write_csv(dyn.variance_decomposition(profiles), out / "variance_decomposition.csv"),
        write_csv(dyn.objective_profiles(profiles), out / "objective_profiles.csv"),
        write_csv(shares, out / "mechanism_shares.csv"),
        write_csv(pairs, out / "disagreement_pairs.csv"),
        write_csv(curve, out / "disagreement_curve.csv"),
    ]
    figures = {
        "mechanism_shares.png": mechanism_figure(shares)
        if len(shares)
        else nothing_to_draw("Mechanism shares", "no trace has a mechanism (no observed checkpoint)"),
        "disagreement.png": disagreement_figure(curve)
        if len(curve)
        else nothing_to_draw("Disagreement against entropy-profile RMSE", "fewer than two models share a problem"),
        "trajectories.png": trajectory_figure(chosen)
        if chosen
        else nothing_to_draw("Answer-distribution trajectories", "no trace has a mechanism (no observed checkpoint)"),
    }
    for name, fig in sorted(figures.items()):
        paths.append(write_png(fig, out / name))
    return paths
