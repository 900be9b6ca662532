"""The exploratory tables and figures of one variant, and the sweep table (docs/reference.md section 6).

Tables are built as pandas frames by pure functions (``exploratory_tables``, ``sweep_frame``);
only ``write_exploratory`` touches the file system, through ``cotdyn.files.writers``, so the same
records and seeds give byte-identical files.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Mapping

import pandas as pd

from cotdyn.analysis import exploratory as ex
from cotdyn.analysis.secondary import sweep_columns
from cotdyn.files.writers import write_csv, write_png, write_text
from cotdyn.report import figures
from cotdyn.report.csp import with_policy
from cotdyn.stats import cell_resamples, derive_seed

TABLES = (
    "ranking",
    "logistic",
    "partial_correlation",
    "violation_magnitude",
    "label_coupling",
    "early_exit",
    "epsilon_sweep",
    "coverage_curves",
)
FIGURES = ("risk_coverage.png", "coverage_curves.png", "example_trajectories.png", "violation_buckets.png")
TABLES_HTML = "tables.html"


def _cells(records: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    ex.check_records(records)
    return [(str(c), g.reset_index(drop=True)) for c, g in records.groupby(records["cell"].astype(str), sort=True)]


def exploratory_tables(
    records: pd.DataFrame,
    *,
    m: int,
    epsilon: float,
    seed: int,
    draws: int = 50,
    resamples: int = 1000,
    level: float = 0.95,
) -> dict[str, pd.DataFrame]:
    """Every exploratory table over all cells of one variant (docs/reference.md section 6), keyed by table name.

    ``m`` and ``epsilon`` are the variant's protocol values; ``seed`` is the analysis seed, from
    which each cell and statistic derives its own stream.
    """
    out: dict[str, list[dict]] = {name: [] for name in TABLES}
    for cell, rows in _cells(records):
        first = {name: len(table) for name, table in out.items()}
        _cell_tables(out, cell, rows, m=m, epsilon=epsilon, seed=seed, draws=draws, resamples=resamples, level=level)
        note = undefined_reason(rows)
        for name, table in out.items():
            if name != "coverage_curves" and len(table) == first[name]:
                table.append({"cell": cell, "reason": note or "nothing to estimate"})
            for row in table[first[name] :]:
                if note and not row.get("reason") and any(_is_null(v) for v in row.values()):
                    row["reason"] = note
    frames = {name: pd.DataFrame(rows) for name, rows in out.items()}
    for name, frame in frames.items():
        if name != "coverage_curves" and "reason" not in frame.columns:
            frame["reason"] = None
    return frames


def undefined_reason(rows: pd.DataFrame) -> str | None:
    """Why a cell's exploratory statistics are undefined: no analyzed chain, or a constant label."""
    kept = ex.analyzed(rows)
    if kept.empty:
        return f"no analyzed chains ({len(rows)} of {len(rows)} excluded)"
    if kept["correct"].nunique() < 2:
        return f"correct is constant over the {len(kept)} analyzed chains"
    return None


def _is_null(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _cell_tables(
    out: dict[str, list[dict]],
    cell: str,
    rows: pd.DataFrame,
    *,
    m: int,
    epsilon: float,
    seed: int,
    draws: int,
    resamples: int,
    level: float,
) -> None:
    """Append one cell's rows to every exploratory table."""
    tie_seed = derive_seed(seed, "aurc", cell)
    out["ranking"] += [{"cell": cell, "label": "correct"} | r for r in ex.ranking_table(rows, draws, tie_seed)]
    if "chain_correct" in rows:
        out["ranking"] += [
            {"cell": cell, "label": "chain_correct"} | r
            for r in ex.ranking_table(rows, draws, tie_seed, label="chain_correct")
        ]
    fit = ex.standardized_logit(rows)
    for term in ("const", *fit.terms):
        out["logistic"].append(
            {
                "cell": cell,
                "term": term,
                "n": fit.n,
                "coef": fit.coef[term] if fit.coef else None,
                "se": fit.se[term] if fit.se else None,
                "p": fit.p[term] if fit.p else None,
                "reason": fit.reason,
            }
        )
    kept = ex.analyzed(rows)
    r, p = ex.partial_correlation(
        kept["monotone"].to_numpy(dtype=float),
        kept["correct"].to_numpy(dtype=float),
        kept["n_points"].to_numpy(dtype=float),
    )
    out["partial_correlation"].append(
        {"cell": cell, "n": int(len(kept)), "covariate": "n_points", "r_partial": r, "p": p}
    )
    out["violation_magnitude"].append({"cell": cell} | ex.violation_magnitude(rows))
    if {"pred", "chain_answer", "chain_correct"} <= set(rows.columns):
        out["label_coupling"].append({"cell": cell} | ex.label_coupling(rows))
    # The cell's one resample matrix, the one its registered analysis reads (common random numbers).
    idx = cell_resamples(seed, cell, len(kept), resamples) if len(kept) and resamples else None
    out["early_exit"] += [
        {"cell": cell, "epsilon": float(epsilon)} | r for r in ex.early_exit(rows, epsilon, idx, level)
    ]
    out["epsilon_sweep"] += [{"cell": cell} | r for r in ex.epsilon_sweep(rows, m, idx, level)]
    if {"reference_tokens", "reference_truncated"} <= set(rows.columns):
        curve = ex.coverage_curve(rows["reference_tokens"], rows["reference_truncated"].astype(bool))
        out["coverage_curves"] += ex.coverage_rows(cell, curve)


def coverage_curves(records: pd.DataFrame) -> dict[str, ex.CoverageCurve]:
    return {
        cell: ex.coverage_curve(rows["reference_tokens"], rows["reference_truncated"].astype(bool))
        for cell, rows in _cells(records)
    }


def exploratory_figures(records: pd.DataFrame, *, seed: int, draws: int = 50) -> dict:
    """The exploratory figures by file name (risk-coverage uses the first cell's tie seed stream)."""
    return {
        "risk_coverage.png": figures.risk_coverage_figure(records, draws, derive_seed(seed, "aurc", "figure")),
        "coverage_curves.png": figures.coverage_figure(coverage_curves(records)),
        "example_trajectories.png": figures.trajectory_figure(records),
        "violation_buckets.png": figures.violation_bucket_figure(records),
    }


def sweep_frame(
    summaries: Mapping[str, Mapping[str, dict]],
    records: Mapping[str, Mapping[str, pd.DataFrame]],
    registered: str = "registered",
    extras: Mapping[str, Mapping[str, dict]] | None = None,
) -> pd.DataFrame:
    """Every variant against the registered cell (docs/reference.md section 6), with chain-length quantiles
    taken from each variant's records, and ``extras`` (variant -> cell -> further columns) beside them."""
    extras = extras or {}
    lengths = {
        v: {c: ex.chain_length_stats(r) | extras.get(v, {}).get(c, {}) for c, r in cells.items()}
        for v, cells in records.items()
    }
    return pd.DataFrame(ex.sweep_table(summaries, registered, lengths))


def derive_sweeps(summaries: list, records: list, registered: str, *, seed: int, resamples: int, level: float,
                  out_csv, out_html) -> list[Path]:  # fmt: skip
    """analysis/sweeps.csv and .html as rule sweeps writes them, and the audit again: every cell's
    summary.json and records.parquet under every variant (paths ``.../<cell>/<variant>/<file>``)."""
    by_summary, by_records, extras = {}, {}, {}
    # read each (cell, variant) from its path, not from the order of the inputs
    for s, r in zip(sorted(map(str, summaries)), sorted(map(str, records))):
        cell, variant = Path(s).parent.parent.name, Path(s).parent.name
        if (cell, variant) != (Path(r).parent.parent.name, Path(r).parent.name):
            raise ValueError(f"sweeps: summary {s} and records {r} are not of one cell and variant")
        by_summary.setdefault(variant, {})[cell] = json.loads(Path(s).read_text())
        frame = pd.read_parquet(r, columns=["reference_tokens", "raw_units", "coherence", "correct", "excluded"])
        by_records.setdefault(variant, {})[cell] = frame
        n = len(ex.analyzed(frame))
        idx = cell_resamples(seed, cell, n, resamples) if n else None
        extras.setdefault(variant, {})[cell] = sweep_columns(frame, idx, level)
    frame = sweep_frame(by_summary, by_records, registered, extras)
    return [write_csv(frame, Path(out_csv)), write_text(sweeps_html(frame, registered), Path(out_html))]


def sweeps_html(frame: pd.DataFrame, registered: str = "registered") -> str:
    """The sweep table as a page; a study without sweep variants says so instead of showing a
    row of zero deltas."""
    title = "Sensitivity sweeps against the registered cell"
    if set(frame.get("variant", [])) <= {registered}:
        note = f"This study runs no sweep variant: there is nothing to compare with the {registered} cells."
        return tables_html({}, title).replace("</body>", f"<p>{html.escape(note, quote=False)}</p></body>")
    return tables_html({"sweeps": frame}, title)


# A page shows 4 significant digits, enough to read; the CSV beside it keeps FLOAT_FORMAT's 10.
HTML_FLOAT_FORMAT = "%.4g"


def _cell_text(value) -> str:
    """A table cell for the page: floats to 4 significant digits (the CSVs keep full precision),
    missing values empty."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return HTML_FLOAT_FORMAT % value
    return str(value)


def tables_html(tables: Mapping[str, pd.DataFrame], title: str) -> str:
    """The tables as one standalone HTML page, so the Snakemake report shows them inline (it
    offers CSV files for download only). Numbers to 4 significant digits; the CSVs hold them in full."""
    # title and names carry cell and variant names, the cells model output: all escaped (to_html's default)
    title = html.escape(title, quote=False)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>",
        "<style>body{font-family:sans-serif;font-size:13px}table{border-collapse:collapse;margin-bottom:2em}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style></head><body>",
        f"<h1>{title}</h1>",
    ]
    for name, frame in tables.items():
        parts.append(f"<h2 id='{html.escape(name)}'>{html.escape(name, quote=False)}</h2>")
        parts.append(frame.map(_cell_text).to_html(index=False, border=0, escape=True))
    parts.append("</body></html>")
    return with_policy("\n".join(parts) + "\n")


def write_exploratory(
    records: pd.DataFrame,
    out_dir: str | Path,
    *,
    m: int,
    epsilon: float,
    seed: int,
    draws: int = 50,
    resamples: int = 1000,
    level: float = 0.95,
) -> list[Path]:
    """Compute and write ``<table>.csv`` for every name in TABLES, all of them rendered in
    TABLES_HTML, and the FIGURES to ``out_dir``; returns the paths in that order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = exploratory_tables(records, m=m, epsilon=epsilon, seed=seed, draws=draws, resamples=resamples, level=level)
    paths = [write_csv(tables[name], out / f"{name}.csv") for name in TABLES]
    paths.append(write_text(tables_html(tables, "Exploratory tables (outside the registration)"), out / TABLES_HTML))
    paths += [write_png(fig, out / name) for name, fig in exploratory_figures(records, seed=seed, draws=draws).items()]
    return paths
