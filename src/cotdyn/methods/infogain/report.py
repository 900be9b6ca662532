"""Write the toy experiment's tables (CSV), checks (JSON) and Figure 3-style heatmaps (PNG).

Byte-deterministic for a given result: fixed float format, sorted JSON keys, no timestamps.
Wall times are not written here (they belong to the job's log).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cotdyn.files.writers import write_bytes, write_text  # noqa: E402

FLOAT_FORMAT = "%.6f"

TABLES = {
    "ig_summary.csv": "ig",
    "orm_summary.csv": "orm",
    "ms_summary.csv": "ms",
    "subtask_ig.csv": "subtask",
    "detection.csv": "detection",
    "table1_llm3.csv": "table1",
    "samplewise.csv": "samplewise",
    "training_history.csv": "training",
}


def _csv(frame: pd.DataFrame, path: Path) -> Path:
    return write_text(frame.to_csv(index=False, float_format=FLOAT_FORMAT, na_rep="NA", lineterminator="\n"), path)


def _json_default(value: Any):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.ndarray, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _round_floats(value: Any) -> Any:
    """Floats to 10 significant digits so the JSON does not carry platform-level noise."""
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round_floats(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(f"{float(value):.10g}")
    return value


def _heatmap(ax, matrix: pd.DataFrame, title: str, fmt: str, cmap: str, vmin=None, vmax=None) -> None:
    values = matrix.to_numpy(dtype=float)
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(values.shape[1]), [str(c) for c in matrix.columns])
    ax.set_yticks(range(values.shape[0]), [str(i) for i in matrix.index])
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=10)
    for (r, c), v in np.ndenumerate(values):
        red, green, blue, _ = image.cmap(image.norm(v)) if np.isfinite(v) else (1, 1, 1, 1)
        ink = "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"  # legible on dark cells
        ax.text(c, r, "NA" if np.isnan(v) else format(v, fmt), ha="center", va="center", fontsize=7, color=ink)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)


def _pivot(frame: pd.DataFrame, value: str, subset: str, steps) -> pd.DataFrame:
    sel = frame[(frame["subset"] == subset) & (frame["step"].isin(steps))]
    return sel.pivot(index="llm", columns="step", values=value).sort_index()


def figure3(result: dict, path: Path) -> Path:
    """Seed 000 Figure 3 over chains with a wrong final answer: (a) IG, (b) mean ORM probability,
    (c) Math-Shepherd share of correct completions, LLM x step 1..5."""
    steps = range(1, 6)
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.6))
    ig = _pivot(result["ig"], "ig", "wrong_answer", steps)
    lim = float(np.nanmax(np.abs(ig.to_numpy()))) or 1.0
    _heatmap(axes[0], ig, "(a) information gain (nats)", ".2f", "RdBu", -lim, lim)
    _heatmap(
        axes[1],
        _pivot(result["orm"], "orm_probability", "wrong_answer", steps),
        "(b) ORM P(correct)",
        ".2f",
        "viridis",
        0,
        1,
    )
    _heatmap(
        axes[2],
        _pivot(result["ms"], "ms_soft", "wrong_answer", steps),
        "(c) Math-Shepherd share correct",
        ".2f",
        "viridis",
        0,
        1,
    )
    fig.suptitle("Toy experiment, chains with a wrong final answer (test split)", fontsize=11)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return write_bytes(buffer.getvalue(), path)


def ig_subsets_figure(result: dict, path: Path) -> Path:
    """Aggregate IG over all chains, wrong-answer chains and correct-answer chains."""
    steps = range(1, 6)
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.6))
    frames = {s: _pivot(result["ig"], "ig", s, steps) for s in ("all", "wrong_answer", "correct_answer")}
    lim = max(float(np.nanmax(np.abs(f.to_numpy()))) for f in frames.values()) or 1.0
    for ax, (subset, frame) in zip(axes, frames.items()):
        _heatmap(ax, frame, f"IG, {subset.replace('_', ' ')} chains", ".2f", "RdBu", -lim, lim)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return write_bytes(buffer.getvalue(), path)


def write_infogain(result: dict, out_dir: str | Path) -> list[Path]:
    """Write every table, the checks and the figures of a ``toy_experiment`` result; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    missing = [
        key for key in (*TABLES.values(), "acceptance", "params", "seed", "models", "split_sizes") if key not in result
    ]
    if missing:
        raise KeyError(f"infogain result is missing {missing}")
    paths = [_csv(result[key], out / name) for name, key in TABLES.items()]
    summary = {key: result[key] for key in ("acceptance", "params", "seed", "models", "split_sizes")}
    summary["paper_table1"] = _paper_rows(result["table1"])
    path = out / "acceptance.json"
    write_text(json.dumps(_round_floats(summary), sort_keys=True, indent=2, default=_json_default) + "\n", path)
    paths.append(path)
    paths.append(figure3(result, out / "figure3_heatmaps.png"))
    paths.append(ig_subsets_figure(result, out / "ig_heatmaps.png"))
    return paths


def _paper_rows(table1: pd.DataFrame) -> list[dict]:
    rows = []
    for _, row in table1[table1["primary"]].iterrows():
        rows.append(
            {
                "method": row["method"],
                "measured": {k: _nan_to_none(row[k]) for k in ("accuracy", "tpr", "fpr")},
                "paper": {k: _nan_to_none(row[f"paper_{k}"]) for k in ("accuracy", "tpr", "fpr")},
            }
        )
    return rows


def _nan_to_none(value):
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)
