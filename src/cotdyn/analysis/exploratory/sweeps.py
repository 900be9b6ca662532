"""Sensitivity sweeps against the registered cell (docs/reference.md section 6)."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from cotdyn.analysis.exploratory.inputs import check_records

SWEEP_FIELDS = (
    "n",  # every record of the cell; n_analyzed those kept after exclusions (the panel table's n)
    "n_analyzed",
    "n_excluded",
    "accuracy",
    "monotone_coverage",
    "gap_pp",
    "truncation_rate",
    "cap_hit_rate",
    "median_reference_tokens",
    "p90_reference_tokens",
)


def chain_length_stats(records: pd.DataFrame) -> dict:
    """Median and 90th percentile of the reference chain length in tokens (seed 003 section 5.1)."""
    check_records(records, ("reference_tokens",))
    tokens = records["reference_tokens"].to_numpy(dtype=float)
    if tokens.size == 0:
        return {"median_reference_tokens": None, "p90_reference_tokens": None}
    return {
        "median_reference_tokens": float(np.median(tokens)),
        "p90_reference_tokens": float(np.quantile(tokens, 0.9)),
    }


def sweep_table(
    summaries: Mapping[str, Mapping[str, dict]],
    registered: str = "registered",
    chain_lengths: Mapping[str, Mapping[str, dict]] | None = None,
) -> list[dict]:
    """One row per (variant, cell): the summary fields and their difference from the registered
    cell (``delta_<field>``, variant minus registered). Rate deltas stay in rate units; gap_pp is
    already in points. ``chain_lengths`` (variant -> cell -> ``chain_length_stats``) adds the
    median and p90 chain length, which summary.json does not hold."""
    if registered not in summaries:
        raise KeyError(f"sweep_table: no summaries for the registered variant '{registered}'")
    chain_lengths = chain_lengths or {}

    def fields(variant: str, cell: str) -> dict | None:
        s = summaries.get(variant, {}).get(cell)
        if s is None:
            return None
        row = {f: s.get(f) for f in SWEEP_FIELDS} | {"gap_pp_reason": s.get("gap_pp_reason")}
        row.update(chain_lengths.get(variant, {}).get(cell, {}))
        return row

    out = []
    for variant in sorted(summaries, key=lambda v: (v != registered, v)):
        for cell in sorted(summaries[variant]):
            mine, ref = fields(variant, cell), fields(registered, cell)
            row = {"variant": variant, "cell": cell} | mine
            for f in SWEEP_FIELDS:
                a, b = mine.get(f), (ref or {}).get(f)
                row[f"delta_{f}"] = None if a is None or b is None else float(a) - float(b)
            out.append(row)
    return out
