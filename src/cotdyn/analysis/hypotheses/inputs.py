"""Inputs of the registered analysis: the records contract, the plan's settings, one cell's arrays."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.records.contract import RECORD_COLUMNS  # read_records checks every file against it

# What analyze itself reads (plus the plan's H5 features).
ANALYSIS_COLUMNS = ("cell", "problem_id", "n_points", "monotone", "violations", "coherence", "correct", "excluded")


# The settings a plan file of each version does not name: what that version's code decided, read
# only for a plan of that version, so that every version computes what it registered. Each later
# version names in its plan file what the earlier one left to the code (plan v2 lists its own under
# "Deviations from the previous plan version"); a key missing from a version's row is one its plan must name.
PLAN_V3_UNREGISTERED = {
    # every Spearman p-value was scipy.stats.spearmanr's t approximation (H3's entered Holm)
    "spearman_tests": {"H2": {"kind": "t_approximation"}, "H3": {"kind": "t_approximation"}},
    "interval": "percentile",  # the (alpha/2, 1 - alpha/2) quantiles of the kept resamples
    "quantile_rule": "linear",  # numpy.quantile's default
    "zero_width": ("H1", "H2", "H3", "H4"),  # H5's [x, x] was trusted (issue 49)
    "perfect_separation": "not_estimable",  # a gap of 100 pp read not_estimable through the zero-width rule
}
PLAN_V2_UNREGISTERED = {
    **PLAN_V3_UNREGISTERED,
    # H5's CI: each row of the cell's one resample matrix keeps the test problems it drew (v2, 87f7308)
    "ci_resampling": "cell_matrix",
    "min_discordant_minority": None,  # no discordant-problem rule for H5's interval
    "degenerate": "reported",  # a zero-width interval, or H5 without a baseline false positive, is reported
}
PLAN_V1_UNREGISTERED = {
    "p_values": {"fisher": "greater", "H2": "two-sided", "H3": "less"},
    "undefined_p": 1.0,
    "supported_requires": ("ci_criterion",),
    "model": {
        "kind": "logistic_regression", "penalty": "l2", "C": 1.0, "fit_intercept": True,
        "scaling": "none", "solver": "lbfgs", "max_iter": 1000,
    },
    "tie_rule": "draws",
    "groups": None,  # no group is held to a size
    "min_kept_fraction": None,
    "estimation_verdicts": False,  # H4 estimable read as supported
    # H5's CI: the test split resampled from its own stream (seed, cell, "H5"), as at registration
    **PLAN_V2_UNREGISTERED, "ci_resampling": "test_split_stream",
}  # fmt: skip


@dataclass(frozen=True)
class PlanVersion:
    """What a plan version registered beyond its plan file, and the shape of its hypotheses.json."""

    unregistered: dict
    names_version: bool  # hypotheses.json carries plan_version (the report prints it)
    lists_computations: bool  # hypotheses.json's settings list the keys version 4 registers
    # each interval criterion names `over` (all_cells | each_cell); it never changed a result, every
    # criterion being evaluated per cell and combined by verdict_rule.combine
    criterion_over: bool


# Every place the analysis differs by plan version reads this table; a later version reads the last row.
PLAN_VERSIONS = {
    1: PlanVersion(PLAN_V1_UNREGISTERED, names_version=False, lists_computations=False, criterion_over=True),
    2: PlanVersion(PLAN_V2_UNREGISTERED, names_version=False, lists_computations=False, criterion_over=True),
    3: PlanVersion(PLAN_V3_UNREGISTERED, names_version=True, lists_computations=False, criterion_over=True),
    4: PlanVersion({}, names_version=True, lists_computations=True, criterion_over=False),
}


def version_rules(number: int) -> PlanVersion:
    if number < 1:
        raise ValueError(f"plan_version: must be >= 1, got {number}")
    return PLAN_VERSIONS[min(number, max(PLAN_VERSIONS))]


CI_RESAMPLINGS = ("test_split_stream", "cell_matrix", "stratified_split")
DEGENERATE_RULES = ("reported", "not_estimable")
TIE_RULES = ("expected", "draws")
VERDICT_PARTS = ("ci_criterion", "holm_reject")
SPEARMAN_TESTS = ("t_approximation", "permutation")
INTERVALS = ("percentile",)
QUANTILE_RULES = ("linear",)  # numpy.quantile's method names; only the registered one is implemented
ZERO_WIDTH_HYPOTHESES = ("H1", "H2", "H3", "H4", "H5")
PERFECT_SEPARATION_RULES = ("not_estimable", "estimate")


@dataclass(frozen=True)
class Settings:
    """The plan's analysis parameters (plan.yaml ``analysis``, ``holm`` and ``verdict_rule``)."""

    resamples: int
    level: float
    seed: int
    features: tuple[str, ...]
    train_fraction: float
    split_seed: int
    tie_rule: str
    tie_draws: int | None
    tie_seed: int | None
    model: dict
    alternatives: dict
    min_group_size: int | None  # None: the plan holds no group to a size
    precise_group_size: int | None
    min_kept_fraction: float | None
    supported_requires: tuple[str, ...]
    estimation_verdicts: bool
    undefined_p: float
    ci_resampling: str
    min_discordant_minority: int | None  # below it, H5's interval is flagged imprecise and decides nothing
    degenerate: str
    spearman_tests: dict  # how each Spearman p-value is computed
    interval: str
    quantile_rule: str
    zero_width: tuple[str, ...]  # the hypotheses whose interval [x, x] is a value fixed by construction
    perfect_separation: str
    plan_version: int

    @property
    def version(self) -> PlanVersion:
        return version_rules(self.plan_version)

    @classmethod
    def from_plan(cls, plan: dict) -> "Settings":
        boot = plan_key(plan, "analysis", "bootstrap")
        h5 = plan_key(plan, "analysis", "h5")
        analysis = plan["analysis"]
        rule = plan.get("verdict_rule", {})
        number = int(plan.get("plan_version", 1))
        version = version_rules(number)

        def registered(mapping: dict, key: str, where: str):
            if key in mapping:
                return mapping[key]
            if key in version.unregistered:
                return version.unregistered[key]
            raise KeyError(f"{where}: missing key '{key}'")

        tie_rule = _known(registered(h5, "tie_rule", "analysis.h5"), TIE_RULES, "analysis.h5.tie_rule")
        draws = tie_rule == "draws"
        groups = registered(analysis, "groups", "analysis")
        requires = tuple(registered(rule, "supported_requires", "verdict_rule"))
        for part in requires:
            _known(part, VERDICT_PARTS, "verdict_rule.supported_requires")
        discordant = registered(h5, "min_discordant_minority", "analysis.h5")
        kept = registered(boot, "min_kept_fraction", "analysis.bootstrap")
        p_values = dict(registered(analysis, "p_values", "analysis"))
        spearman_tests = _spearman_tests(registered(p_values, "spearman_tests", "analysis.p_values"))
        p_values.pop("spearman_tests", None)  # the alternatives are the rest
        zero_width = tuple(registered(rule, "zero_width", "verdict_rule"))
        for hid in zero_width:
            _known(hid, ZERO_WIDTH_HYPOTHESES, "verdict_rule.zero_width")
        _check_criterion_over(plan, number, version)
        return cls(
            resamples=int(plan_key(boot, "resamples", where="analysis.bootstrap")),
            level=float(plan_key(boot, "level", where="analysis.bootstrap")),
            seed=int(plan_key(boot, "seed", where="analysis.bootstrap")),
            features=tuple(plan_key(h5, "features", where="analysis.h5")),
            train_fraction=float(plan_key(h5, "train_fraction", where="analysis.h5")),
            split_seed=int(plan_key(h5, "split_seed", where="analysis.h5")),
            tie_rule=tie_rule,
            tie_draws=int(plan_key(h5, "tie_draws", where="analysis.h5")) if draws else None,
            tie_seed=int(plan_key(h5, "tie_seed", where="analysis.h5")) if draws else None,
            model=dict(registered(h5, "model", "analysis.h5")),
            alternatives=p_values,
            min_group_size=int(plan_key(groups, "min_group_size", where="analysis.groups")) if groups else None,
            precise_group_size=int(plan_key(groups, "precise_group_size", where="analysis.groups")) if groups else None,
            min_kept_fraction=None if kept is None else float(kept),
            supported_requires=requires,
            estimation_verdicts=bool(registered(rule, "estimation_verdicts", "verdict_rule")),
            undefined_p=float(registered(plan_key(plan, "holm"), "undefined_p", "holm")),
            ci_resampling=_known(
                registered(h5, "ci_resampling", "analysis.h5"), CI_RESAMPLINGS, "analysis.h5.ci_resampling"
            ),
            min_discordant_minority=None if discordant is None else int(discordant),
            degenerate=_known(
                registered(rule, "degenerate", "verdict_rule"), DEGENERATE_RULES, "verdict_rule.degenerate"
            ),
            spearman_tests=spearman_tests,
            interval=_known(
                registered(boot, "interval", "analysis.bootstrap"), INTERVALS, "analysis.bootstrap.interval"
            ),
            quantile_rule=_known(
                registered(boot, "quantile_rule", "analysis.bootstrap"),
                QUANTILE_RULES,
                "analysis.bootstrap.quantile_rule",
            ),
            zero_width=zero_width,
            perfect_separation=_known(
                registered(rule, "perfect_separation", "verdict_rule"),
                PERFECT_SEPARATION_RULES,
                "verdict_rule.perfect_separation",
            ),
            plan_version=number,
        )


def _known(value: Any, known: tuple, where: str) -> Any:
    if value not in known:
        raise ValueError(f"{where}: unknown value {value!r} (known: {', '.join(known)})")
    return value


def _spearman_tests(tests: Any) -> dict:
    """analysis.p_values.spearman_tests: how H2's and H3's p-values are computed, each named."""
    out = {}
    for hid in ("H2", "H3"):
        where = f"analysis.p_values.spearman_tests.{hid}"
        test = dict(plan_key(tests, hid, where="analysis.p_values.spearman_tests"))
        _known(plan_key(test, "kind", where=where), SPEARMAN_TESTS, f"{where}.kind")
        if test["kind"] == "permutation":
            test["resamples"] = int(plan_key(test, "resamples", where=where))
            test["seed"] = int(plan_key(test, "seed", where=where))
            if test["resamples"] < 1:
                raise ValueError(f"{where}.resamples: must be >= 1, got {test['resamples']}")
        out[hid] = test
    return out


def _check_criterion_over(plan: dict, number: int, version: PlanVersion) -> None:
    for h in plan_key(plan, "hypotheses"):
        criterion, hid = h.get("criterion", {}), h.get("id", "?")
        if not version.criterion_over:
            if "over" in criterion:
                raise ValueError(
                    f"hypothesis {hid}: criterion.over is not a key of plan version {number} "
                    "(each criterion is evaluated per cell and combined by verdict_rule.combine)"
                )
        elif criterion.get("kind") != "estimation" and criterion.get("over") not in ("all_cells", "each_cell"):
            raise ValueError(
                f"hypothesis {hid}: criterion.over must be all_cells or each_cell, got {criterion.get('over')!r}"
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
    """Concatenate records.parquet files, checking each against the docs/reference.md section 11 columns."""
    if not paths:
        raise ValueError("no records files given")
    frames = []
    for path in paths:
        frame = pd.read_parquet(path)
        require_columns(frame, RECORD_COLUMNS, str(path))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
