"""``analyze``: the registered analysis of docs/reference.md section 5 over records of any cells."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cotdyn import stats
from cotdyn.analysis.hypotheses.cells import (
    H3_BUCKETS,
    MISSING_CELL,
    h1_shape_contrast,
    h2_magnitude_null,
    h3_graded_signal,
)
from cotdyn.analysis.hypotheses.descriptive import h2_against_shape
from cotdyn.analysis.hypotheses.h5 import _h5_undefined, h5_triage_filter
from cotdyn.analysis.hypotheses.inputs import (
    ANALYSIS_COLUMNS,
    CellData,
    Settings,
    cell_data,
    ordered_cells,
    plan_key,
    registered_cells,
)
from cotdyn.analysis.hypotheses.verdicts import (
    h4_distilled_contrast,
    h4_min_group_size,
    holm_family,
    hypothesis_verdict,
)
from cotdyn.files.columns import require_columns
from cotdyn.plan.config import split_cell
from cotdyn.stats import finite_or_none


def analyze(records: pd.DataFrame, plan: dict, plan_sha256: str) -> dict:
    """The registered analysis of docs/reference.md section 5 over records of any cells (hypotheses.json)."""
    settings = Settings.from_plan(plan)
    require_columns(records, (*ANALYSIS_COLUMNS, *settings.features), "records")
    duplicated = records.duplicated(["cell", "problem_id"])
    if duplicated.any():
        first = records.loc[duplicated, ["cell", "problem_id"]].iloc[0].tolist()
        raise ValueError(f"records: {int(duplicated.sum())} duplicated (cell, problem_id) rows, e.g. {first}")
    cells, gap_resamples = {}, {}
    groups = dict(tuple(records.groupby(records["cell"].astype(str), sort=True)))
    registered = registered_cells(plan)
    for cell in ordered_cells(plan, records):
        split_cell(cell)
        if cell in groups:
            cells[cell], gap_resamples[cell] = analyze_cell(cell_data(groups[cell], cell, settings.features), settings)
        else:
            cells[cell] = missing_cell(cell, settings)
        # A cell outside the registered family gets every statistic, and no verdict rests on it.
        cells[cell]["role"] = "registered" if cell in registered else "descriptive"
    hypotheses = plan_key(plan, "hypotheses")
    min_group = h4_min_group_size(hypotheses, settings)
    panel = plan_key(plan, "panel")
    # H4 compares a distilled model with the standard ones; a plan whose panel names no distilled
    # model (a study of one model, such as the embedded default's) registers no H4
    h4 = {
        b: h4_distilled_contrast(b, cells, gap_resamples, panel, min_group, settings)
        for b in (plan_key(panel, "benchmarks", where="panel") if "distilled" in panel else [])
    }
    holm = holm_family(plan, cells, settings.undefined_p)
    return {
        "plan_sha256": plan_sha256,
        **({"plan_version": settings.plan_version} if settings.version.names_version else {}),
        "settings": {
            "bootstrap": {"resamples": settings.resamples, "level": settings.level, "seed": settings.seed},
            "h5": {
                "features": list(settings.features),
                "train_fraction": settings.train_fraction,
                "split_seed": settings.split_seed,
                "model": settings.model,
                "tie_rule": settings.tie_rule,
                "tie_draws": settings.tie_draws,
                "tie_seed": settings.tie_seed,
            },
            "alternatives": settings.alternatives,
            "groups": {"min_group_size": settings.min_group_size, "precise_group_size": settings.precise_group_size},
            "verdict_rule": {"supported_requires": list(settings.supported_requires)},
            **(registered_computations(settings) if settings.version.lists_computations else {}),
        },
        "cells": cells,
        "H4": h4,
        "holm": holm,
        "verdicts": {h["id"]: hypothesis_verdict(h, cells, h4, holm, settings) for h in hypotheses},
    }


def registered_computations(s: Settings) -> dict:
    return {
        "spearman_tests": s.spearman_tests,
        "interval": {"kind": s.interval, "quantile_rule": s.quantile_rule},
        "zero_width": list(s.zero_width),
        "perfect_separation": s.perfect_separation,
    }


def cell_counts(d: CellData) -> dict:
    return {
        "status": "ok",
        "n_records": d.n_records,
        "n": d.n,
        "n_excluded": d.n_excluded,
        "excluded_share": finite_or_none(d.n_excluded / d.n_records) if d.n_records else None,
        "median_points": finite_or_none(np.median(d.n_points)) if d.n else None,
        "truncation_rate": d.truncation_rate,
        "cap_hit_rate": d.cap_hit_rate,
    }


def analyze_cell(d: CellData, s: Settings) -> tuple[dict, np.ndarray | None]:
    """H1, H2, H3 and H5 of one cell; one resample matrix (seeded per cell) serves them all."""
    idx = stats.cell_resamples(s.seed, d.cell, d.n, s.resamples) if d.n else None
    h1, gap_resamples = h1_shape_contrast(d, idx, s)
    result = {
        "summary": cell_counts(d),
        "H1": h1,
        "H2": h2_magnitude_null(d, idx, s),
        "H3": h3_graded_signal(d, idx, s),
        "H5": h5_triage_filter(d, s, idx),
    }
    result["H2"]["against_shape"] = h2_against_shape(d, idx, s, result["H2"])  # descriptive, decides nothing
    return result, gap_resamples


def missing_cell(cell: str, s: Settings) -> dict:
    """The labelled placeholder of a cell the plan names but the records lack: every count and
    statistic null, every reason saying why."""
    empty = np.zeros(0)
    result, _ = analyze_cell(CellData(cell, 0, 0, *(empty,) * 4, np.zeros((0, len(s.features))), empty, None, None), s)
    result["summary"] = {key: None for key in result["summary"]} | {"status": "missing"}
    result["H1"].update(n=None, n_excluded=None, n_monotone=None, n_non_monotone=None)
    for key in ("H1", "H2", "H3"):
        result[key]["reason"] = MISSING_CELL
    result["H2"]["n"] = result["H3"]["n"] = None
    result["H3"]["buckets"] = [{"bucket": b, "n": None, "accuracy": None} for b in H3_BUCKETS]
    result["H5"] = _h5_undefined(MISSING_CELL)
    return result
