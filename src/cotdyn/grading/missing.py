"""A missing answer, defined once (``answer_or_none``): None, NaN, pandas NA, NaT or a blank string.

Every module that reads a stored answer passes it through (``cotdyn.grading.answers`` re-exports
these), because a parquet round trip turns a missing string into NaN.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd


def answer_or_none(value: Any) -> str | None:
    """A stored answer as a string, or None when it is missing (None, NaN, NA, NaT, blank).

    Numbers (a gold read from JSON as 18, say) become their string; anything else is an error
    that names its type, since an answer can only be text.
    """
    if isinstance(value, str):
        return value if value.strip() else None
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"an answer must be text, got the boolean {value!r}")
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else str(float(value))
    raise TypeError(f"an answer must be text or missing, got {type(value).__name__} {value!r}")


def answers_or_none(values: Iterable[Any]) -> list[str | None]:
    """``answer_or_none`` over a column of stored answers."""
    return [answer_or_none(v) for v in as_list(values)]


def is_answered(values: Iterable[Any]) -> np.ndarray:
    """Boolean mask: which of ``values`` hold an answer (``answer_or_none`` is not None)."""
    return np.array([answer_or_none(v) is not None for v in as_list(values)], dtype=bool)


def as_list(values: Iterable[Any]) -> Iterable[Any]:
    """A column's values as Python objects, converted at once: a pandas string column is held by
    pyarrow, and iterating it fetches one value per call (a panel's audit spent seconds so)."""
    return values.tolist() if isinstance(values, (pd.Series, pd.Index, np.ndarray)) else values
