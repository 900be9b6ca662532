"""The records contract of the exploratory analyses and the analyzed rows (the signals: ``cotdyn.protocol.signals``)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from cotdyn.files.columns import require_columns

# What the exploratory analyses read of the records contract (cotdyn.records.contract).
REQUIRED = (
    "cell",
    "problem_id",
    "trajectory",
    "n_points",
    "monotone",
    "violations",
    "coherence",
    "final_entropy",
    "correct",
    "excluded",
)


def check_records(records: pd.DataFrame, columns: Sequence[str] = REQUIRED, source: str = "records") -> None:
    require_columns(records, columns, source)


def analyzed(records: pd.DataFrame) -> pd.DataFrame:
    """The non-excluded rows, in problem order; these are the problems every statistic is over."""
    check_records(records, ("excluded",))
    if records["excluded"].isna().any():
        raise ValueError("records: column 'excluded' has missing values")
    return records.loc[~records["excluded"].astype(bool)].reset_index(drop=True)


def _labels(values) -> np.ndarray:
    y = pd.Series(values)
    if y.isna().any():
        raise ValueError("label column has missing values")
    return y.to_numpy(dtype=bool)
