"""The one check that a table has the columns a step reads."""

from __future__ import annotations

from typing import Iterable

import pandas as pd


def require_columns(frame: pd.DataFrame, columns: Iterable[str], source: str) -> None:
    """Raise naming ``source`` and every missing column (and the columns it does have)."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        have = ", ".join(sorted(map(str, frame.columns)))
        raise ValueError(f"{source}: missing column(s) {', '.join(missing)} (has: {have})")
