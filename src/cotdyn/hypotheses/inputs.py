"""Inputs of the registered analysis: the records contract, the plan's settings, one cell's arrays."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cotdyn.columns import require_columns

# The records contract (docs/design.md section 11); read_records checks every file against it.
RECORD_COLUMNS = (
    "cell", "problem_id", "trajectory", "n_points", "monotone", "violations", "coherence",
    "final_entropy", "final_confidence", "pred", "gold", "correct", "chain_answer", "chain_correct",
    "excluded", "exclusion_reason", "reference_tokens", "reference_truncated", "raw_units", "cap_hit",
)  # fmt: skip
# What analyze itself reads (plus the plan's H5 features).
ANALYSIS_COLUMNS = ("cell", "problem_id", "n_points", "monotone", "violations", "coherence", "correct", "excluded")


@dataclass(frozen=True)
class Settings:
    """The plan's analysis parameters (plan.yaml ``analysis``)."""

    resamples: int
    level: float
    seed: int
    features: tuple[str, ...]
    train_fraction: float
    split_seed: int
    tie_draws: int
    tie_seed: int

    @classmethod
    def from_plan(cls, plan: dict) -> "Settings":
        boot = plan_key(plan, "analysis", "bootstrap")
        h5 = plan_key(plan, "analysis", "h5")
        return cls(
            resamples=int(plan_key(boot, "resamples", where="analysis.bootstrap")),
            level=float(plan_key(boot, "level", where="analysis.bootstrap")),
            seed=int(plan_key(boot, "seed", where="analysis.bootstrap")),
            features=tuple(plan_key(h5, "features", where="analysis.h5")),
            train_fraction=float(plan_key(h5, "train_fraction", where="analysis.h5")),
            split_seed=int(plan_key(h5, "split_seed", where="analysis.h5")),
            tie_draws=int(plan_key(h5, "tie_draws", where="analysis.h5")),
            tie_seed=int(plan_key(h5, "tie_seed", where="analysis.h5")),
        )


def plan_key(mapping: Any, *keys: str, where: str = "plan") -> Any:
    for key in keys:
        if not isinstance(mapping, dict) or key not in mapping:
            raise KeyError(f"{where}: missing key '{key}'")
        mapping, where = mapping[key], f"{where}.{key}"
    return mapping


@dataclass(frozen=True)
class CellData:
    """The usable (non-excluded) problems of one cell as arrays, plus its counts."""

    cell: str
    n_records: int
    n_excluded: int
    monotone: np.ndarray
    correct: np.ndarray
    violations: np.ndarray
    coherence: np.ndarray
    features: np.ndarray
    n_points: np.ndarray
    truncation_rate: float | None
    cap_hit_rate: float | None

    @property
    def n(self) -> int:
        return int(self.monotone.size)


def cell_data(rows: pd.DataFrame, cell: str, features: Sequence[str]) -> CellData:
    if rows["excluded"].isna().any():
        raise ValueError(f"cell {cell}: column 'excluded' has missing values")
    excluded = rows["excluded"].to_numpy(dtype=bool)
    used = rows.loc[~excluded]
    for column in (*ANALYSIS_COLUMNS, *features):
        n_missing = int(used[column].isna().sum())
        if n_missing:
            raise ValueError(f"cell {cell}: column '{column}' has {n_missing} missing value(s) in non-excluded rows")
    return CellData(
        cell=cell,
        n_records=len(rows),
        n_excluded=int(excluded.sum()),
        monotone=used["monotone"].to_numpy(dtype=bool),
        correct=used["correct"].to_numpy(dtype=bool),
        violations=used["violations"].to_numpy(dtype=float),
        coherence=used["coherence"].to_numpy(dtype=float),
        features=used[list(features)].to_numpy(dtype=float),
        n_points=used["n_points"].to_numpy(dtype=float),
        truncation_rate=_share(rows, "reference_truncated"),
        cap_hit_rate=_share(rows, "cap_hit"),
    )


def _share(rows: pd.DataFrame, column: str) -> float | None:
    if column not in rows.columns or rows[column].isna().all() or len(rows) == 0:
        return None
    return float(rows[column].dropna().astype(bool).mean())


def panel_cells(plan: dict) -> list[str]:
    """The registered cells in the paper's order: each model of the panel on each benchmark."""
    panel = plan_key(plan, "panel")
    models = list(plan_key(panel, "models", where="panel"))
    benchmarks = list(plan_key(panel, "benchmarks", where="panel"))
    return [f"{m}-{b}" for m in models for b in benchmarks]


def registered_cells(plan: dict) -> set[str]:
    """Cells the plan registers: the panel and every cell a hypothesis names."""
    return set(panel_cells(plan)) | {c for h in plan["hypotheses"] for c in h.get("cells", [])}


def ordered_cells(plan: dict, records: pd.DataFrame) -> list[str]:
    registered = panel_cells(plan)
    named = [c for h in plan["hypotheses"] for c in h.get("cells", [])]
    extra = sorted((set(records["cell"].astype(str)) | set(named)) - set(registered))
    return registered + extra


def read_records(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Concatenate records.parquet files, checking each against the docs/design.md section 11 columns."""
    if not paths:
        raise ValueError("no records files given")
    frames = []
    for path in paths:
        frame = pd.read_parquet(path)
        require_columns(frame, RECORD_COLUMNS, str(path))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
