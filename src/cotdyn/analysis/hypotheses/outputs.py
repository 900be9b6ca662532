"""hypotheses.json, the paper-shaped tables and the forest plot: pure row builders first, the file
writing last."""

from __future__ import annotations

import csv
import io
import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cotdyn.files.writers import write_json, write_png, write_text


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def _excludes_zero(ci: list) -> bool | None:
    return None if ci[0] is None else bool(ci[0] > 0 or ci[1] < 0)


def table_rows(result: dict) -> dict[str, list[dict]]:
    """The paper-shaped tables (seed 003 section 4) as lists of rows."""
    cells = result["cells"]
    verdict_h2 = result["verdicts"].get("H2", {}).get("cells", {})
    panel, h2, h3, h5 = [], [], [], []
    for cell, r in cells.items():
        s, h1 = r["summary"], r["H1"]
        panel.append({
            "cell": cell, "role": r["role"], "n": _n_total(h1), "n_analyzed": h1["n"], "n_excluded": h1["n_excluded"], "excluded_share": s["excluded_share"],
            "accuracy": h1["accuracy"], "median_points": s["median_points"], "coverage": h1["coverage"],
            "gap_pp": h1["gap_pp"], "ci_lo": h1["ci"][0], "ci_hi": h1["ci"][1], "ci_n_kept": h1["ci_n_kept"],
            "odds_ratio": h1["odds_ratio"], "p_fisher": h1["p_fisher"], "ci_excludes_0": _excludes_zero(h1["ci"]),
            "truncation_rate": s["truncation_rate"], "cap_hit_rate": s["cap_hit_rate"],
            "flags": _flags(h1), "reason": h1["reason"],
        })  # fmt: skip
        b2 = r["H2"]
        # H2 is reported beside the shape effect (docs/reference.md section 5): the gap and the violation rho.
        h2.append({
            "cell": cell, "rho": b2["rho"], "ci_lo": b2["ci"][0], "ci_hi": b2["ci"][1], "ci_n_kept": b2["ci_n_kept"],
            "p_spearman": b2["p_spearman"], "criterion": verdict_h2.get(cell, {}).get("verdict", "not an H2 cell"),
            "shape_gap_pp": h1["gap_pp"], "violations_rho": r["H3"]["rho"], **_against_shape(b2),
            "flags": _flags(b2), "reason": b2["reason"],
        })  # fmt: skip
        b3 = r["H3"]
        row = {
            "cell": cell,
            "rho": b3["rho"],
            "ci_lo": b3["ci"][0],
            "ci_hi": b3["ci"][1],
            "ci_n_kept": b3["ci_n_kept"],
            "p_spearman": b3["p_spearman"],
        }
        for bucket in b3["buckets"]:
            row[f"n_{bucket['bucket']}"] = bucket["n"]
            row[f"accuracy_{bucket['bucket']}"] = bucket["accuracy"]
        bucket_flags = [f"bucket {b['bucket']}: {f}" for b in b3["buckets"] for f in b.get("flags") or []]
        h3.append(row | {"flags": "; ".join([*(b3.get("flags") or []), *bucket_flags]) or None, "reason": b3["reason"]})
        b5 = r["H5"]
        as_run = b5["as_run"] or {}
        h5.append({
            "cell": cell, "n_test": b5["n_test"], "k": b5["k"], "baseline_coverage": b5["baseline_coverage"],
            "fp_baseline": b5["fp_baseline"], "fp_filter": b5["fp_filter"], "reduction_pp": b5["reduction_pp"],
            "ci_lo": b5["ci"][0], "ci_hi": b5["ci"][1], "ci_n_kept": b5["ci_n_kept"],
            "as_run_reduction_pp": as_run.get("reduction_pp"), "as_run_coverage": as_run.get("coverage"),
            "as_run_coverage_overshoot": as_run.get("coverage_overshoot"), "flags": _flags(b5), "reason": b5["reason"],
        })  # fmt: skip
    h4 = [
        {"benchmark": b, "distilled_cell": e["distilled_cell"], "gap_pp": e["gap_pp"], "ci_lo": e["ci"][0],
         "ci_hi": e["ci"][1], "standard_mean_gap_pp": e["standard_mean_gap_pp"], "difference_pp": e["difference_pp"],
         "difference_ci_lo": e["difference_ci"][0], "difference_ci_hi": e["difference_ci"][1],
         "estimable": e["estimable"], "verdict": e.get("verdict"), "flags": _flags(e), "reason": e["reason"]}
        for b, e in result["H4"].items()
    ]  # fmt: skip
    holm_rows = [{k: m[k] for k in ("id", "cell", "p_name", "p", "p_adjusted", "alpha", "reject", "reason")}
                 for m in result["holm"]]  # fmt: skip
    return {
        "panel_table": panel,
        "h2_table": h2,
        "h3_buckets": h3,
        "h4_table": h4,
        "h5_table": h5,
        "holm_table": holm_rows,
        "verdicts_table": verdict_rows(result["verdicts"]),
    }


def _against_shape(h2: dict) -> dict:
    """H2's descriptive comparison with the shape effect (``descriptive.h2_against_shape``) as columns."""
    a = h2.get("against_shape") or {}
    shape, diff = a.get("rho_shape_ci") or [None, None], a.get("abs_difference_ci") or [None, None]
    return {"shape_rho": a.get("rho_shape"), "shape_rho_ci_lo": shape[0], "shape_rho_ci_hi": shape[1],
            "abs_difference": a.get("abs_difference"), "abs_difference_ci_lo": diff[0],
            "abs_difference_ci_hi": diff[1]}  # fmt: skip


def _n_total(h1: dict) -> int | None:
    """Every record of the cell, analysed or excluded (the sweeps table's n; n_analyzed is H1's n)."""
    return None if h1["n"] is None else h1["n"] + h1["n_excluded"]


def _flags(block: dict) -> str | None:
    return "; ".join(block.get("flags") or []) or None


def verdict_rows(verdicts: dict) -> list[dict]:
    """One row per hypothesis and cell, then one for the hypothesis: both parts of the verdict rule
    (CI criterion, Holm) beside the verdict they give."""
    rows = []
    for hid, entry in verdicts.items():
        for cell, c in entry["cells"].items():
            rows.append({
                "hypothesis": hid, "cell": cell, "estimate": c.get("estimate"), "ci_lo": c["ci"][0], "ci_hi": c["ci"][1],
                "ci_criterion": c.get("ci_criterion"), "holm_reject": c.get("holm_reject"), "verdict": c["verdict"],
                "flags": _flags(c), "reason": c.get("reason"),
            })  # fmt: skip
        rows.append({
            "hypothesis": hid, "cell": "all", "estimate": None, "ci_lo": None, "ci_hi": None,
            "ci_criterion": entry.get("ci_criterion"), "holm_reject": entry.get("holm_reject"),
            "verdict": entry["verdict"], "flags": None, "reason": None,
        })  # fmt: skip
    return rows


def json_ready(value: Any) -> Any:
    """Plain JSON types with floats at 10 significant digits, so bytes do not hinge on last-bit noise."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ValueError(f"non-finite number {value!r} reached the output; undefined values must be null")
        return float(format(float(value), ".10g"))
    return value


def forest_rows(result: dict) -> tuple[list[dict], list[str]]:
    """The forest plot's rows (cells that ran) and the registered cells that did not run, which it
    leaves out. A gap without an interval, or with a zero-width one (a constant outcome: every
    chain right, or every chain wrong, in both groups), is not estimable, never a precise zero."""
    rows, not_run = [], []
    for cell, block in result["cells"].items():
        if block.get("summary", {}).get("status") == "missing":
            not_run.append(cell)
            continue
        h1 = block["H1"]
        gap, (lo, hi) = h1["gap_pp"], h1["ci"]
        label = cell if block["role"] == "registered" else f"{cell} (descriptive)"
        if gap is None or lo is None or hi is None or lo == hi:
            reason = h1.get("reason") or ("zero-width interval: constant outcome" if lo == hi else "no interval")
            rows.append({"label": label, "gap": None, "ci": None, "status": f"not estimable ({reason})"})
        else:
            status = "95% CI excludes 0" if lo > 0 or hi < 0 else "95% CI includes 0"
            rows.append({"label": label, "gap": gap, "ci": (lo, hi), "status": status})
    return rows, not_run


def forest_figure(result: dict):
    """Forest plot of every run cell's H1 gap with its 95% CI (docs/reference.md section 5); a gap
    that is not estimable is labelled, not drawn, and cells that did not run are named below."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    rows, not_run = forest_rows(result)
    note = "\n".join(textwrap.wrap(f"not run, left out: {', '.join(not_run)}", 110)) if not_run else ""
    # inches below the axes for the note's lines, so neither it nor the x label is cut off
    below = 0.17 * (note.count("\n") + 1) + 0.1 if note else 0.0
    height = 0.45 * max(len(rows), 1) + 2.4 + below
    fig = Figure(figsize=(7.0, height))
    ax = fig.add_subplot()
    colours = {"95% CI excludes 0": "C0", "95% CI includes 0": "C3"}
    for y, row in enumerate(rows):
        if row["gap"] is None:
            # across the axes, not at x = 0: a not estimable gap has no position on the scale
            ax.text(0.5, y, row["status"], va="center", ha="center", fontsize=8, color="0.3",
                    transform=ax.get_yaxis_transform())  # fmt: skip
            continue
        ax.plot(row["ci"], [y, y], color="0.2", linewidth=1.2)
        ax.plot([row["gap"]], [y], marker="s", linestyle="none", color=colours[row["status"]])
    if not rows:
        ax.text(0.5, 0.5, "nothing to draw: no cell ran", transform=ax.transAxes, ha="center", fontsize=9)
    ax.axvline(0.0, color="0.5", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5) if rows else ax.set_yticks([])
    ax.set_xlabel("accuracy gap, monotone minus non-monotone (pp),\nwith its 95% bootstrap CI")
    ax.set_title("H1: accuracy gap of epsilon-monotone chains, by cell", fontsize=10)
    used = sorted({r["status"] for r in rows if r["gap"] is not None})
    if used:
        handles = [Line2D([], [], marker="s", linestyle="none", color=colours[s], label=s) for s in used]
        ax.legend(handles=handles, fontsize=8, loc="best")
    if note:
        fig.text(0.01, 0.01, note, fontsize=8, color="0.3", va="bottom")
    fig.tight_layout(rect=(0, below / height, 1, 1))
    return fig


def write_analysis(result: dict, records: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write hypotheses.json, the CSV tables and forest_gaps.png; return the paths written.

    ``records`` are the records the result was computed from; their per-cell counts are checked
    against the result so that a stale or mismatched result is never written beside new records.
    """
    counts = records.groupby(records["cell"].astype(str)).size()
    for cell, block in result["cells"].items():
        have, count = block["summary"]["n_records"], int(counts.get(cell, 0)) or None
        if have != count:
            raise ValueError(
                f"result does not match the records: cell {cell} has {count or 0} records, result says {have}"
            )
    unknown = sorted(set(counts.index) - set(result["cells"]))
    if unknown:
        raise ValueError(f"result does not match the records: no results for cell(s) {', '.join(unknown)}")
    out_dir = Path(out_dir)
    written = [write_json(json_ready(result), out_dir / "hypotheses.json")]
    written += [write_text(csv_text(rows), out_dir / f"{name}.csv") for name, rows in table_rows(result).items()]
    written.append(write_png(forest_figure(result), out_dir / "forest_gaps.png"))
    return written


def csv_text(rows: list[dict]) -> str:
    """Rows as CSV in the tables' own format (``_fmt``: yes/no, 6 significant digits, empty null)."""
    buffer = io.StringIO()
    columns = list(rows[0]) if rows else []
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[_fmt(row.get(c)) for c in columns] for row in rows])
    return buffer.getvalue()
