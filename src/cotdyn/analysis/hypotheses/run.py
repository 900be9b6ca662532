"""``analyze``: the registered analysis of docs/design.md section 5 over records of any cells."""

from __future__ import annotations

import pandas as pd

from cotdyn.analysis.hypotheses.cells import analyze_cell, missing_cell
from cotdyn.analysis.hypotheses.inputs import (
    ANALYSIS_COLUMNS,
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


def analyze(records: pd.DataFrame, plan: dict, plan_sha256: str) -> dict:
    """The registered analysis of docs/design.md section 5 over records of any cells (hypotheses.json)."""
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
        },
        "cells": cells,
        "H4": h4,
        "holm": holm,
        "verdicts": {h["id"]: hypothesis_verdict(h, cells, h4, holm, settings) for h in hypotheses},
    }
