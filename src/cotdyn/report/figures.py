"""Figures of the exploratory analyses (seed 003 sections 4.3, 5.1, Appendix F.2).

Built on ``matplotlib.figure.Figure`` (Agg canvas, no pyplot state); ``cotdyn.files.writers`` saves them
(fixed dpi, no Software metadata), so equal data give equal bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np
import pandas as pd

from cotdyn.analysis import exploratory as ex
from cotdyn.analysis.hypotheses import H3_BUCKETS, violation_buckets
from cotdyn.files.writers import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _grid(n: int, ncols: int, width: float, height: float) -> tuple[Figure, np.ndarray]:
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig = new_figure(figsize=(width * ncols, height * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_axis_off()
    return fig, axes


def nothing_to_draw(title: str, reason: str, figsize: tuple[float, float] = (6.0, 2.4)) -> Figure:
    """The figure of a degenerate study: the figure's title and, in place of a plot, why it is empty."""
    fig = new_figure(figsize=figsize)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(f"{title}: nothing to draw", fontsize=10)
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True, fontsize=9, color="0.3", transform=ax.transAxes)
    return fig


def _note_empty_panel(ax, reason: str) -> None:
    ax.text(0.5, 0.5, reason, ha="center", va="center", fontsize=8, color="0.3", transform=ax.transAxes)


def _by_cell(records: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    ex.check_records(records, ("cell",))
    return [(str(c), g) for c, g in records.groupby(records["cell"].astype(str), sort=True)]


def risk_coverage_figure(records: pd.DataFrame, draws: int, seed: int) -> Figure:
    """Selective risk against coverage for each signal, one panel per cell (Appendix F.2); the
    dashed rule is the original's 73.7% coverage, where the truncated area stops."""
    cells = _by_cell(records)
    if not cells:
        return nothing_to_draw("Selective risk against coverage", "no records")
    fig, axes = _grid(len(cells), 2, 5.0, 3.6)
    for ax, (cell, rows) in zip(axes, cells):
        rows = ex.analyzed(rows)
        y = rows["correct"].to_numpy(dtype=bool)
        coverage = np.arange(1, len(rows) + 1) / max(len(rows), 1)
        for signal in ex.in_records(rows.columns):
            if len(rows):
                ax.plot(
                    coverage,
                    ex.selective_risk_curve(signal.score(rows), y, draws, seed),
                    color=signal.color,
                    linestyle=signal.dash,
                    linewidth=1.4,
                    label=signal.label,
                )
        ax.axvline(ex.TRUNCATED_COVERAGE, color="0.5", linestyle="--", linewidth=0.8)
        ax.set_xlim(0, 1)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("coverage")
        ax.set_ylabel("selective risk (error rate)")
        ax.set_title(f"{cell} (n={len(rows)})", fontsize=9)
        if len(rows):
            ax.legend(fontsize=8, frameon=False)
        else:
            ax.set_title(f"{cell}: nothing to draw", fontsize=9)
            _note_empty_panel(ax, "no analyzed chains (every chain excluded)")
    fig.tight_layout()
    return fig


def coverage_figure(curves: Mapping[str, ex.CoverageCurve]) -> Figure:
    """Fraction of reference chains completing within a token budget, per cell (seed 003 Figure 1).

    Each curve is a step through observed completions only. Its endpoint mark is filled where the
    curve reaches its real maximum and hollow where it stops at the budget with chains censored;
    censored chains are never drawn as observations, so the curve is not carried to 100%. The
    dashed rule marks the budget.
    """
    if not curves:
        return nothing_to_draw("Reference-chain completion within the budget", "no records")
    fig = new_figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot()
    caps = set()
    for i, (cell, c) in enumerate(sorted(curves.items())):
        color = f"C{i % 10}"
        x = np.concatenate([[0], c.lengths])
        y = np.concatenate([[0.0], c.completed])
        ax.step(x, y, where="post", color=color, linewidth=1.3, label=f"{cell} ({c.n_censored}/{c.n} censored)")
        if c.lengths.size:
            ax.plot(
                [c.lengths[-1]],
                [c.completed[-1]],
                marker="o",
                markersize=7,
                color=color,
                markerfacecolor="none" if c.end_censored else color,
                linestyle="none",
            )
        if c.cap is not None:
            caps.add(c.cap)
    for cap in sorted(caps):
        ax.axvline(cap, color="0.5", linestyle="--", linewidth=0.8)
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.set_xlabel("reference-chain length (tokens)")
    ax.set_ylabel("fraction completed within budget")
    ax.set_title("hollow end: stops at the budget with chains censored; filled: real maximum", fontsize=8)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    fig.tight_layout()
    return fig


def example_chains(records: pd.DataFrame, per_label: int = 4) -> pd.DataFrame:
    """Deterministic examples: the first ``per_label`` analyzed chains (by problem id) of each cell
    that are correct, and the first that are incorrect."""
    rows = ex.analyzed(records).sort_values(["cell", "problem_id"], kind="stable")
    picked = rows.groupby(["cell", "correct"], sort=True).head(per_label)
    return picked.sort_values(["cell", "correct", "problem_id"], ascending=[True, False, True], kind="stable")


def trajectory_figure(records: pd.DataFrame, per_label: int = 4) -> Figure:
    """Example entropy trajectories of correct (green) and incorrect (red) chains, one panel per
    cell; a dashed line marks a non-monotone chain. A cell without analyzed chains says so."""
    chosen = example_chains(records, per_label)
    cells = [cell for cell, _ in _by_cell(records)]
    if not cells:
        return nothing_to_draw("Example entropy trajectories", "no records")
    fig, axes = _grid(len(cells), 2, 5.0, 3.4)
    for ax, cell in zip(axes, cells):
        mine = chosen[chosen["cell"].astype(str) == cell]
        if mine.empty:
            ax.set_title(f"{cell}: nothing to draw", fontsize=9)
            _note_empty_panel(ax, "no analyzed chains (every chain excluded)")
            continue
        for row in mine.itertuples():
            t = np.asarray(row.trajectory, dtype=float)
            ax.plot(
                np.arange(t.size),
                t,
                marker="o",
                markersize=3,
                linewidth=1.0,
                color="#1b7837" if row.correct else "#b2182b",
                linestyle="-" if row.monotone else "--",
                alpha=0.85,
            )
        ax.set_xlabel("answer-bearing prefix")
        ax.set_ylabel("answer entropy (nats)")
        ax.set_ylim(bottom=0)
        n = len(ex.analyzed(records[records["cell"].astype(str) == cell]))
        ax.set_title(
            f"{cell}: {len(mine)} of {n} analyzed chains (the first {per_label} correct and {per_label} incorrect)\n"
            "green correct, red incorrect; dashed non-monotone",
            fontsize=8,
        )
    fig.tight_layout()
    return fig


def ax_heights(ax) -> list[float]:
    return [p.get_height() for p in ax.patches] or [np.nan]


def violation_bucket_figure(records: pd.DataFrame) -> Figure:
    """Accuracy by violation count 0, 1, 2, >=3 per cell (seed 003 section 4.3), bars labelled with n."""
    cells = _by_cell(records)
    if not cells:
        return nothing_to_draw("Accuracy by violation count", "no records")
    fig = new_figure(figsize=(7.0, 3.8))
    ax = fig.add_subplot()
    width = 0.8 / len(cells)
    for i, (cell, rows) in enumerate(cells):
        rows = ex.analyzed(rows)
        buckets = violation_buckets(rows["violations"].to_numpy(dtype=int), rows["correct"].to_numpy(dtype=bool))
        x = np.arange(len(H3_BUCKETS)) + (i - (len(cells) - 1) / 2) * width
        # an empty bucket has no accuracy: no bar, only its n = 0
        acc = [b["accuracy"] if b["accuracy"] is not None else np.nan for b in buckets]
        ax.bar(x, acc, width=width, color=f"C{i % 10}", label=cell)
        for xi, a, b in zip(x, acc, buckets):
            ax.text(xi, (0.0 if np.isnan(a) else a) + 0.01, f"n={b['n']}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(np.arange(len(H3_BUCKETS)), [f"{b} violations" for b in H3_BUCKETS])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy by violation count (n above each bar)", fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    if all(np.isnan(a) for a in ax_heights(ax)):
        _note_empty_panel(ax, "nothing to draw: no analyzed chains in any bucket")
    fig.tight_layout()
    return fig
