"""The registered analysis: H1-H5, Holm and computed verdicts (seed 003 sections 3.4, 4; DESIGN section 5).

``analyze`` turns per-problem records into the ``hypotheses.json`` structure of DESIGN section 11;
``write_analysis`` writes it with the paper-shaped tables and the forest plot. Every criterion is
read from the plan and every verdict is computed here. Excluded problems are counted and enter no
statistic. A statistic that is undefined on a cell (an empty group, a constant label, a missing
cell) is reported as null together with a reason, never as a number.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from cotdyn import stats
from cotdyn.stats import Interval

# The records contract (DESIGN section 11); read_records checks every file against it.
RECORD_COLUMNS = (
    "cell", "problem_id", "trajectory", "n_points", "monotone", "violations", "coherence",
    "final_entropy", "final_confidence", "pred", "gold", "correct", "chain_answer", "chain_correct",
    "excluded", "exclusion_reason", "reference_tokens", "reference_truncated", "raw_units", "cap_hit",
)  # fmt: skip
# What analyze itself reads (plus the plan's H5 features).
ANALYSIS_COLUMNS = ("cell", "problem_id", "n_points", "monotone", "violations", "coherence", "correct", "excluded")

# H1's Fisher test is registered one-sided; H3 is directional in the same way (rho below zero), so
# its Holm p-value is one-sided too. H2 is a null claim and its p-value is two-sided and descriptive.
FISHER_ALTERNATIVE = "greater"
H2_ALTERNATIVE = "two-sided"
H3_ALTERNATIVE = "less"
H3_BUCKETS = ("0", "1", "2", ">=3")

# Where each registered statistic lives in a cell's (or H4's) results.
STATISTICS = {
    "accuracy_gap_pp": ("H1", "gap_pp", "ci"),
    "spearman_coherence_correct": ("H2", "rho", "ci"),
    "spearman_violations_correct": ("H3", "rho", "ci"),
    "fp_reduction_pp_matched_coverage": ("H5", "reduction_pp", "ci"),
    "distilled_gap_difference_pp": ("H4", "difference_pp", "difference_ci"),
}
VERDICTS = ("supported", "not_supported", "not_estimable")
MISSING_CELL = "cell missing from the records"


# ---------------------------------------------------------------------------------------------
# Inputs


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
        boot = _plan_key(plan, "analysis", "bootstrap")
        h5 = _plan_key(plan, "analysis", "h5")
        return cls(
            resamples=int(_plan_key(boot, "resamples", where="analysis.bootstrap")),
            level=float(_plan_key(boot, "level", where="analysis.bootstrap")),
            seed=int(_plan_key(boot, "seed", where="analysis.bootstrap")),
            features=tuple(_plan_key(h5, "features", where="analysis.h5")),
            train_fraction=float(_plan_key(h5, "train_fraction", where="analysis.h5")),
            split_seed=int(_plan_key(h5, "split_seed", where="analysis.h5")),
            tie_draws=int(_plan_key(h5, "tie_draws", where="analysis.h5")),
            tie_seed=int(_plan_key(h5, "tie_seed", where="analysis.h5")),
        )


def _plan_key(mapping: Any, *keys: str, where: str = "plan") -> Any:
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


def split_cell(cell: str) -> tuple[str, str]:
    """(model key, benchmark): the benchmark is what follows the last '-' (DESIGN section 11)."""
    model, sep, benchmark = cell.rpartition("-")
    if not sep or not model or not benchmark:
        raise ValueError(f"cell name '{cell}' is not '<model>-<benchmark>'")
    return model, benchmark


def check_columns(records: pd.DataFrame, columns: Iterable[str], source: str) -> None:
    missing = [c for c in columns if c not in records.columns]
    if missing:
        raise ValueError(f"{source}: missing column(s) {', '.join(missing)}")


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
    panel = _plan_key(plan, "panel")
    models = list(_plan_key(panel, "models", where="panel"))
    benchmarks = list(_plan_key(panel, "benchmarks", where="panel"))
    return [f"{m}-{b}" for m in models for b in benchmarks]


def registered_cells(plan: dict) -> set[str]:
    """Cells the plan registers: the panel and every cell a hypothesis names."""
    return set(panel_cells(plan)) | {c for h in plan["hypotheses"] for c in h.get("cells", [])}


def _ordered_cells(plan: dict, records: pd.DataFrame) -> list[str]:
    registered = panel_cells(plan)
    named = [c for h in plan["hypotheses"] for c in h.get("cells", [])]
    extra = sorted((set(records["cell"].astype(str)) | set(named)) - set(registered))
    return registered + extra


# ---------------------------------------------------------------------------------------------
# Per-cell hypotheses


def _num(x: Any) -> float | None:
    """A finite float, or None for an undefined value."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _ci_fields(interval: Interval) -> dict:
    return {"ci": interval.as_list(), "ci_n_kept": interval.n_kept, "ci_resamples": interval.n_resamples}


def _reason(notes: list[str]) -> str | None:
    return "; ".join(notes) if notes else None


def _constant_reason(name: str, values: np.ndarray) -> str | None:
    if values.size and values.min() == values.max():
        return f"{name} is constant ({values[0]:g}) over the {values.size} usable problems"
    return None


def h1_shape_contrast(d: CellData, idx: np.ndarray | None, level: float) -> tuple[dict, np.ndarray | None]:
    """H1: accuracy gap monotone minus non-monotone (pp), its bootstrap CI, odds ratio and
    one-sided Fisher p (seed 003 sections 3.4 and 4.1). Also returns the gap resamples for H4."""
    n_mono = int(d.monotone.sum())
    acc_in, acc_out = stats.group_accuracy_rows(d.monotone, d.correct, stats.full_sample(d.n))
    notes = []
    if d.n == 0:
        notes.append(f"no usable problems ({d.n_excluded} of {d.n_records} excluded)")
    else:
        if n_mono == 0:
            notes.append("no monotone chains")
        if n_mono == d.n:
            notes.append("no non-monotone chains")
    gap = _num(100 * (acc_in[0] - acc_out[0])) if d.n else None
    resamples = None
    interval = Interval(None, None, 0, 0)
    odds_ratio = p_fisher = None
    if d.n and not notes:
        resamples = 100 * stats.accuracy_gap_rows(d.monotone, d.correct, idx)
        interval = stats.percentile_interval(resamples, level)
        odds_ratio, p_fisher = stats.fisher_greater(d.monotone, d.correct)
        if not math.isfinite(odds_ratio):
            notes.append("odds ratio undefined or infinite (a zero cell in the 2x2 table)")
    elif idx is not None:
        interval = Interval(None, None, 0, idx.shape[0])
    return {
        "n": d.n,
        "n_excluded": d.n_excluded,
        "n_monotone": n_mono,
        "n_non_monotone": d.n - n_mono,
        "coverage": _num(n_mono / d.n) if d.n else None,
        "accuracy": _num(d.correct.mean()) if d.n else None,
        "accuracy_monotone": _num(acc_in[0]) if d.n else None,
        "accuracy_non_monotone": _num(acc_out[0]) if d.n else None,
        "gap_pp": gap,
        **_ci_fields(interval),
        "odds_ratio": _num(odds_ratio),
        "p_fisher": _num(p_fisher),
        "reason": _reason(notes),
    }, resamples


def _spearman_block(x: np.ndarray, correct: np.ndarray, idx: np.ndarray | None, level: float,
                    name: str, alternative: str, n_resamples: int) -> dict:
    reason = None if x.size >= 3 else f"{x.size} usable problems (a rank correlation needs >= 3)"
    reason = reason or _constant_reason(name, x) or _constant_reason("correct", correct.astype(float))
    if reason:
        return {"rho": None, "ci": [None, None], "ci_n_kept": 0, "ci_resamples": n_resamples,
                "p_spearman": None, "alternative": alternative, "n": int(x.size), "reason": reason}
    rho = stats.spearman_binary(x, correct)
    interval = stats.percentile_interval(stats.spearman_binary_rows(x, correct, idx), level)
    return {"rho": _num(rho), **_ci_fields(interval), "p_spearman": _num(stats.spearman_p(x, correct, alternative)),
            "alternative": alternative, "n": int(x.size), "reason": None}


def h2_magnitude_null(d: CellData, idx: np.ndarray | None, level: float, n_resamples: int) -> dict:
    """H2: Spearman rho of coherence C = H_0 - H_N with correctness, with CI (seed 003 section 4.2)."""
    return _spearman_block(d.coherence, d.correct, idx, level, "coherence", H2_ALTERNATIVE, n_resamples)


def violation_buckets(violations: np.ndarray, correct: np.ndarray) -> list[dict]:
    """Accuracy by violation count 0, 1, 2, >=3 (seed 003 section 4.3); an empty bucket has no accuracy."""
    bucket = np.minimum(violations, 3).astype(int)
    out = []
    for b, label in enumerate(H3_BUCKETS):
        members = bucket == b
        n = int(members.sum())
        out.append({"bucket": label, "n": n, "accuracy": _num(correct[members].mean()) if n else None})
    return out


def h3_graded_signal(d: CellData, idx: np.ndarray | None, level: float, n_resamples: int) -> dict:
    """H3: Spearman rho of the violation count with correctness, with CI, and accuracy by bucket
    (seed 003 section 4.3)."""
    block = _spearman_block(d.violations, d.correct, idx, level, "violations", H3_ALTERNATIVE, n_resamples)
    block["buckets"] = violation_buckets(d.violations, d.correct)
    return block


H5_KEYS = ("baseline_coverage", "k", "n_test", "n_train", "fp_baseline", "fp_filter", "reduction_pp", "ci",
           "ci_n_kept", "ci_resamples", "tie_draws", "as_run", "model")


def _h5_undefined(reason: str, **known: Any) -> dict:
    block = {key: None for key in H5_KEYS}
    block["ci"] = [None, None]
    block.update(known, reason=reason)
    return block


def _probability_by_feature_row(model: LogisticRegression, features: np.ndarray) -> np.ndarray:
    # Scoring each distinct feature row once makes identical rows bit-identical ties, whatever
    # path the linear algebra takes for each row.
    unique, inverse = np.unique(features, axis=0, return_inverse=True)
    return model.predict_proba(unique)[:, 1][inverse.reshape(-1)]


def h5_triage_filter(d: CellData, s: Settings) -> dict:
    """H5: logistic filter vs the bare monotone flag at exactly matched coverage (seed 003 section 4.5).

    Stratified train/test split; the filter accepts k = round(baseline coverage x n_test) test
    problems by descending P(correct), ties broken by a seeded uniform averaged over the plan's
    draws. The CI resamples the test split with the model held fixed; inside each resample the
    draw average is replaced by its exact expectation (the value the draws estimate), so the
    interval carries no tie-breaking Monte-Carlo noise. The as-run quantile threshold is
    reported beside it with its coverage overshoot.
    """
    n_correct = int(d.correct.sum())
    n_wrong = d.n - n_correct
    if min(n_correct, n_wrong) < 2:
        return _h5_undefined(
            f"a stratified split needs >= 2 correct and >= 2 incorrect problems; have {n_correct} and {n_wrong}"
        )
    try:
        x_train, x_test, y_train, y_test, _, mono_test = train_test_split(
            d.features, d.correct, d.monotone,
            train_size=s.train_fraction, stratify=d.correct, random_state=s.split_seed,
        )  # fmt: skip
    except ValueError as err:  # sklearn explains which class or split is too small
        return _h5_undefined(f"stratified split impossible: {err}")
    model = LogisticRegression(max_iter=1000).fit(x_train, y_train)
    fitted = {
        "features": list(s.features),
        "coefficients": [_num(c) for c in model.coef_[0]],
        "intercept": _num(model.intercept_[0]),
    }
    n_test = int(y_test.size)
    k = int(round(mono_test.mean() * n_test))
    known = {"n_test": n_test, "n_train": int(y_train.size), "k": k, "model": fitted,
             "baseline_coverage": _num(k / n_test), "tie_draws": s.tie_draws}
    if k == 0:
        return _h5_undefined("no monotone chain in the test split: the baseline accepts nothing", **known)

    probability = _probability_by_feature_row(model, x_test)
    tiers = stats.descending_tiers(probability)
    acc_baseline = float(y_test[mono_test].mean())
    acc_filter = stats.accuracy_at_k_draws(tiers, y_test, k, s.tie_draws, s.tie_seed)

    idx = stats.resample_indices(n_test, s.resamples, stats.derive_seed(s.seed, d.cell, "H5"))
    acc_baseline_rows, acc_filter_rows = stats.exact_coverage_rows(tiers, mono_test, y_test, idx)
    interval = stats.percentile_interval(100 * (acc_filter_rows - acc_baseline_rows), s.level)

    threshold = float(np.quantile(probability, 1 - k / n_test))
    accepted = probability >= threshold
    acc_as_run = float(y_test[accepted].mean())
    return {
        **known,
        "fp_baseline": _num(1 - acc_baseline),
        "fp_filter": _num(1 - acc_filter),
        "reduction_pp": _num(100 * (acc_filter - acc_baseline)),
        **_ci_fields(interval),
        "as_run": {
            "threshold": _num(threshold),
            "coverage": _num(accepted.mean()),
            "coverage_overshoot": _num(accepted.mean() - k / n_test),
            "fp": _num(1 - acc_as_run),
            "reduction_pp": _num(100 * (acc_as_run - acc_baseline)),
        },
        "reason": None,
    }


def cell_summary(d: CellData) -> dict:
    return {
        "status": "ok",
        "n_records": d.n_records,
        "n": d.n,
        "n_excluded": d.n_excluded,
        "excluded_share": _num(d.n_excluded / d.n_records) if d.n_records else None,
        "median_points": _num(np.median(d.n_points)) if d.n else None,
        "truncation_rate": d.truncation_rate,
        "cap_hit_rate": d.cap_hit_rate,
    }


def analyze_cell(d: CellData, s: Settings) -> tuple[dict, np.ndarray | None]:
    """H1, H2, H3 and H5 of one cell; one resample matrix (seeded per cell) serves H1-H3."""
    idx = stats.resample_indices(d.n, s.resamples, stats.derive_seed(s.seed, d.cell)) if d.n else None
    h1, gap_resamples = h1_shape_contrast(d, idx, s.level)
    result = {
        "summary": cell_summary(d),
        "H1": h1,
        "H2": h2_magnitude_null(d, idx, s.level, s.resamples),
        "H3": h3_graded_signal(d, idx, s.level, s.resamples),
        "H5": h5_triage_filter(d, s),
    }
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


# ---------------------------------------------------------------------------------------------
# H4, Holm, verdicts


def h4_distilled_contrast(benchmark: str, cells: dict, gap_resamples: dict, panel: dict,
                          min_group_size: int, level: float) -> dict:
    """H4 (estimation, two-sided): the distilled gap and its difference from the mean gap of the
    standard models, the difference's CI combining independent per-cell bootstraps resample by
    resample (seed 003 section 4.4). Flagged not estimable when a group is below min_group_size."""
    distilled = f"{_plan_key(panel, 'distilled', where='panel')}-{benchmark}"
    standard = [f"{m}-{benchmark}" for m in _plan_key(panel, "standard", where="panel")]
    notes = []
    missing = [c for c in [distilled, *standard] if cells.get(c, {}).get("summary", {}).get("status") != "ok"]
    if missing:
        notes.append(f"{MISSING_CELL}: {', '.join(missing)}")
    groups = {}
    for cell in [distilled, *standard]:
        if cell in missing:
            continue
        h1 = cells[cell]["H1"]
        groups[cell] = {"monotone": h1["n_monotone"], "non_monotone": h1["n_non_monotone"]}
        for group, size in groups[cell].items():
            if size < min_group_size:
                notes.append(f"{cell} has {size} {group.replace('_', '-')} chains (< min_group_size {min_group_size})")
    d_h1 = cells[distilled]["H1"] if distilled not in missing else None
    gap = d_h1["gap_pp"] if d_h1 else None
    difference = standard_mean = None
    interval = Interval(None, None, 0, 0)
    gaps = [cells[c]["H1"]["gap_pp"] for c in standard if c not in missing]
    if gap is not None and len(gaps) == len(standard) and None not in gaps:
        standard_mean = float(np.mean(gaps))
        difference = gap - standard_mean
        rows = gap_resamples[distilled] - np.mean([gap_resamples[c] for c in standard], axis=0)
        interval = stats.percentile_interval(rows, level)
    elif not notes:
        notes.append("a gap is undefined in one of the cells")
    return {
        "distilled_cell": distilled,
        "standard_cells": standard,
        "gap_pp": gap,
        "ci": d_h1["ci"] if d_h1 else [None, None],
        "ci_n_kept": d_h1["ci_n_kept"] if d_h1 else 0,
        "standard_mean_gap_pp": _num(standard_mean),
        "difference_pp": _num(difference),
        "difference_ci": interval.as_list(),
        "difference_ci_n_kept": interval.n_kept,
        "group_sizes": groups,
        "min_group_size": min_group_size,
        "estimable": not notes,
        "reason": _reason(notes),
    }


def holm_family(plan: dict, cells: dict) -> list[dict]:
    """Holm-Bonferroni over the plan's family (seed 003 section 3.4, Appendix C).

    A member whose p-value is undefined enters the correction as p = 1, so the family keeps its
    registered size and the other members are never corrected less than registered.
    """
    holm_plan = _plan_key(plan, "holm")
    alpha = float(_plan_key(holm_plan, "alpha", where="holm"))
    members = []
    for i, member in enumerate(_plan_key(holm_plan, "family", where="holm")):
        hid, cell, p_name = (_plan_key(member, k, where=f"holm.family[{i}]") for k in ("id", "cell", "p"))
        block = cells.get(cell, {}).get(hid)
        if block is None:
            raise KeyError(f"holm.family[{i}]: no {hid} results for cell '{cell}'")
        if p_name not in block:
            raise KeyError(f"holm.family[{i}]: {hid} has no p-value named '{p_name}'")
        members.append({"id": hid, "cell": cell, "p_name": p_name, "p": block[p_name],
                        "reason": None if block[p_name] is not None else block.get("reason") or "p undefined"})
    if not members:
        return []
    reject, adjusted = stats.holm([1.0 if m["p"] is None else m["p"] for m in members], alpha)
    for m, r, a in zip(members, reject, adjusted):
        m["alpha"] = alpha
        m["p_adjusted"] = _num(a) if m["p"] is not None else None
        m["reject"] = bool(r) if m["p"] is not None else None
    return members


def cell_verdict(criterion: dict, ci: list | None) -> str:
    """One cell's verdict under an interval criterion of the plan."""
    kind = criterion["kind"]
    if ci is None or ci[0] is None or ci[1] is None:
        return "not_estimable"
    lo, hi = ci
    if kind == "ci_lower_above":
        met = lo > float(criterion["value"])
    elif kind == "ci_upper_below":
        met = hi < float(criterion["value"])
    elif kind == "ci_inside":
        met = float(criterion["low"]) < lo and hi < float(criterion["high"])
    else:
        raise ValueError(f"unknown criterion kind '{kind}'")
    return "supported" if met else "not_supported"


def combine_verdicts(verdicts: Iterable[str]) -> str:
    """A hypothesis over several cells: one failing cell decides it; otherwise any undefined cell
    leaves it not estimable."""
    verdicts = list(verdicts)
    if not verdicts:
        return "not_estimable"
    if "not_supported" in verdicts:
        return "not_supported"
    return "not_estimable" if "not_estimable" in verdicts else "supported"


def hypothesis_verdict(hypothesis: dict, cells: dict, h4: dict) -> dict:
    """The verdict of one registered hypothesis, with the numbers that decided it."""
    hid = hypothesis.get("id", "?")
    criterion = _plan_key(hypothesis, "criterion", where=f"hypothesis {hid}")
    kind = _plan_key(criterion, "kind", where=f"hypothesis {hid}.criterion")
    statistic = _plan_key(hypothesis, "statistic", where=f"hypothesis {hid}")
    if statistic not in STATISTICS:
        raise ValueError(f"hypothesis {hid}: unknown statistic '{statistic}' (known: {sorted(STATISTICS)})")
    block_id, estimate_key, ci_key = STATISTICS[statistic]
    entry = {"role": hypothesis.get("role"), "statistic": statistic, "criterion": criterion}
    if kind == "estimation":
        min_group = int(_plan_key(criterion, "min_group_size", where=f"hypothesis {hid}.criterion"))
        per = {}
        for cell in hypothesis.get("cells", []):
            benchmark = split_cell(cell)[1]
            est = h4.get(benchmark)
            per[cell] = {
                "verdict": "supported" if est and est["estimable"] else "not_estimable",
                "estimate": est[estimate_key] if est else None,
                "ci": est[ci_key] if est else [None, None],
                "group_sizes": est["group_sizes"] if est else {},
                "reason": est["reason"] if est else f"no H4 result for benchmark '{benchmark}'",
            }
        entry.update(
            cells=per, min_group_size=min_group,
            note="estimation hypothesis: 'supported' means estimable with every group >= min_group_size; "
                 "the two-sided estimate carries no direction",
        )  # fmt: skip
    else:
        over = criterion.get("over")
        if over not in ("all_cells", "each_cell"):
            raise ValueError(f"hypothesis {hid}: criterion.over must be all_cells or each_cell, got {over!r}")
        per = {}
        for cell in hypothesis.get("cells", []):
            block = cells.get(cell, {}).get(block_id, {})
            ci = block.get(ci_key)
            per[cell] = {
                "verdict": cell_verdict(criterion, ci),
                "estimate": block.get(estimate_key),
                "ci": ci if ci is not None else [None, None],
                "ci_n_kept": block.get("ci_n_kept"),
                "reason": block.get("reason"),
            }
        entry["cells"] = per
    verdicts = [v["verdict"] for v in per.values()]
    entry["cells_supported"] = f"{verdicts.count('supported')} of {len(verdicts)}"
    entry["verdict"] = combine_verdicts(verdicts)
    return entry


# ---------------------------------------------------------------------------------------------
# Entry points


def analyze(records: pd.DataFrame, plan: dict, plan_sha256: str) -> dict:
    """The registered analysis of DESIGN section 5 over records of any cells (hypotheses.json)."""
    settings = Settings.from_plan(plan)
    check_columns(records, (*ANALYSIS_COLUMNS, *settings.features), "records")
    duplicated = records.duplicated(["cell", "problem_id"])
    if duplicated.any():
        first = records.loc[duplicated, ["cell", "problem_id"]].iloc[0].tolist()
        raise ValueError(f"records: {int(duplicated.sum())} duplicated (cell, problem_id) rows, e.g. {first}")
    cells, gap_resamples = {}, {}
    groups = dict(tuple(records.groupby(records["cell"].astype(str), sort=True)))
    registered = registered_cells(plan)
    for cell in _ordered_cells(plan, records):
        split_cell(cell)
        if cell in groups:
            cells[cell], gap_resamples[cell] = analyze_cell(cell_data(groups[cell], cell, settings.features), settings)
        else:
            cells[cell] = missing_cell(cell, settings)
        # A cell outside the registered family gets every statistic, and no verdict rests on it.
        cells[cell]["role"] = "registered" if cell in registered else "descriptive"
    hypotheses = _plan_key(plan, "hypotheses")
    h4_plan = [h for h in hypotheses if h.get("criterion", {}).get("kind") == "estimation"]
    min_group = int(h4_plan[0]["criterion"]["min_group_size"]) if h4_plan else 0
    panel = _plan_key(plan, "panel")
    h4 = {
        b: h4_distilled_contrast(b, cells, gap_resamples, panel, min_group, settings.level)
        for b in _plan_key(panel, "benchmarks", where="panel")
    }
    return {
        "plan_sha256": plan_sha256,
        "settings": {
            "bootstrap": {"resamples": settings.resamples, "level": settings.level, "seed": settings.seed},
            "h5": {"features": list(settings.features), "train_fraction": settings.train_fraction,
                   "split_seed": settings.split_seed, "tie_draws": settings.tie_draws, "tie_seed": settings.tie_seed},
            "alternatives": {"fisher": FISHER_ALTERNATIVE, "H2": H2_ALTERNATIVE, "H3": H3_ALTERNATIVE},
        },
        "cells": cells,
        "H4": h4,
        "holm": holm_family(plan, cells),
        "verdicts": {h["id"]: hypothesis_verdict(h, cells, h4) for h in hypotheses},
    }


def read_records(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Concatenate records.parquet files, checking each against the DESIGN section 11 columns."""
    if not paths:
        raise ValueError("no records files given")
    frames = []
    for path in paths:
        frame = pd.read_parquet(path)
        check_columns(frame, RECORD_COLUMNS, str(path))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# Output: tables, figure, JSON (pure row builders first, the file writing last)


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
            "cell": cell, "role": r["role"], "n": h1["n"], "n_excluded": h1["n_excluded"], "excluded_share": s["excluded_share"],
            "accuracy": h1["accuracy"], "median_points": s["median_points"], "coverage": h1["coverage"],
            "gap_pp": h1["gap_pp"], "ci_lo": h1["ci"][0], "ci_hi": h1["ci"][1], "ci_n_kept": h1["ci_n_kept"],
            "odds_ratio": h1["odds_ratio"], "p_fisher": h1["p_fisher"], "ci_excludes_0": _excludes_zero(h1["ci"]),
            "truncation_rate": s["truncation_rate"], "cap_hit_rate": s["cap_hit_rate"], "reason": h1["reason"],
        })  # fmt: skip
        b2 = r["H2"]
        # H2 is reported beside the shape effect (DESIGN section 5): the gap and the violation rho.
        h2.append({
            "cell": cell, "rho": b2["rho"], "ci_lo": b2["ci"][0], "ci_hi": b2["ci"][1], "ci_n_kept": b2["ci_n_kept"],
            "p_spearman": b2["p_spearman"], "criterion": verdict_h2.get(cell, {}).get("verdict"),
            "shape_gap_pp": h1["gap_pp"], "violations_rho": r["H3"]["rho"], "reason": b2["reason"],
        })  # fmt: skip
        b3 = r["H3"]
        row = {"cell": cell, "rho": b3["rho"], "ci_lo": b3["ci"][0], "ci_hi": b3["ci"][1],
               "ci_n_kept": b3["ci_n_kept"], "p_spearman": b3["p_spearman"]}
        for bucket in b3["buckets"]:
            row[f"n_{bucket['bucket']}"] = bucket["n"]
            row[f"accuracy_{bucket['bucket']}"] = bucket["accuracy"]
        h3.append(row | {"reason": b3["reason"]})
        b5 = r["H5"]
        as_run = b5["as_run"] or {}
        h5.append({
            "cell": cell, "n_test": b5["n_test"], "k": b5["k"], "baseline_coverage": b5["baseline_coverage"],
            "fp_baseline": b5["fp_baseline"], "fp_filter": b5["fp_filter"], "reduction_pp": b5["reduction_pp"],
            "ci_lo": b5["ci"][0], "ci_hi": b5["ci"][1], "ci_n_kept": b5["ci_n_kept"],
            "as_run_reduction_pp": as_run.get("reduction_pp"), "as_run_coverage": as_run.get("coverage"),
            "as_run_coverage_overshoot": as_run.get("coverage_overshoot"), "reason": b5["reason"],
        })  # fmt: skip
    h4 = [
        {"benchmark": b, "distilled_cell": e["distilled_cell"], "gap_pp": e["gap_pp"], "ci_lo": e["ci"][0],
         "ci_hi": e["ci"][1], "standard_mean_gap_pp": e["standard_mean_gap_pp"], "difference_pp": e["difference_pp"],
         "difference_ci_lo": e["difference_ci"][0], "difference_ci_hi": e["difference_ci"][1],
         "estimable": e["estimable"], "reason": e["reason"]}
        for b, e in result["H4"].items()
    ]  # fmt: skip
    holm_rows = [{k: m[k] for k in ("id", "cell", "p_name", "p", "p_adjusted", "alpha", "reject", "reason")}
                 for m in result["holm"]]  # fmt: skip
    return {"panel_table": panel, "h2_table": h2, "h3_buckets": h3, "h4_table": h4, "h5_table": h5,
            "holm_table": holm_rows}


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


def forest_figure(result: dict):
    """Forest plot of every cell's H1 gap with its 95% CI; undefined gaps are labelled, not drawn."""
    from matplotlib.figure import Figure

    cells = list(result["cells"])
    fig = Figure(figsize=(7.0, 0.45 * len(cells) + 1.2))
    ax = fig.add_subplot()
    for y, cell in enumerate(cells):
        h1 = result["cells"][cell]["H1"]
        if h1["gap_pp"] is None:
            ax.text(0.0, y, "undefined", va="center", ha="center", fontsize=8, color="0.4")
            continue
        lo, hi = h1["ci"]
        if lo is not None:
            ax.plot([lo, hi], [y, y], color="0.2", linewidth=1.2)
        ax.plot([h1["gap_pp"]], [y], marker="s", color="C0" if lo is not None and lo > 0 else "C3")
    ax.axvline(0.0, color="0.5", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(cells)), [c if result["cells"][c]["role"] == "registered" else f"{c} (descriptive)"
                                      for c in cells])
    ax.invert_yaxis()
    ax.set_xlabel("accuracy gap, monotone minus non-monotone (pp), 95% bootstrap CI")
    fig.tight_layout()
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
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    path = out_dir / "hypotheses.json"
    path.write_text(json.dumps(json_ready(result), sort_keys=True, indent=2, allow_nan=False) + "\n")
    written.append(path)
    for name, rows in table_rows(result).items():
        path = out_dir / f"{name}.csv"
        with path.open("w", newline="") as handle:
            columns = list(rows[0]) if rows else []
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows([[_fmt(row.get(c)) for c in columns] for row in rows])
        written.append(path)
    path = out_dir / "forest_gaps.png"
    forest_figure(result).savefig(path, dpi=100, metadata={"Software": None})
    written.append(path)
    return written
