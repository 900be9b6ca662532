"""The per-cell hypotheses H1, H2, H3 and H5 (seed 003 sections 3.4, 4.1-4.3, 4.5).

Each takes one cell's usable problems (``CellData``) and returns its block of hypotheses.json:
the estimate, its bootstrap CI, the test's p-value, and a reason whenever a value is null.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cotdyn import stats
from cotdyn.analysis.hypotheses.descriptive import h2_against_shape
from cotdyn.analysis.hypotheses.inputs import CellData, Settings
from cotdyn.stats import Interval

H3_BUCKETS = ("0", "1", "2", ">=3")

MISSING_CELL = "cell missing from the records"


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


def kept_flags(interval: Interval, s: Settings) -> list[str]:
    """A flag when the bootstrap kept fewer than the plan's min_kept_fraction of its resamples
    (a resample is dropped where the statistic is undefined, so the CI is conditional on the rest)."""
    if s.min_kept_fraction is None or interval.lo is None or interval.n_resamples == 0:
        return []
    if interval.n_kept < s.min_kept_fraction * interval.n_resamples:
        return [
            f"bootstrap kept {interval.n_kept} of {interval.n_resamples} resamples "
            f"(< min_kept_fraction {s.min_kept_fraction:g})"
        ]
    return []


def group_rule(sizes: dict[str, int], s: Settings) -> tuple[str | None, list[str]]:
    """The plan's small-group rule for one statistic (analysis.groups): a reason when a group it rests
    on is below min_group_size (the estimate is null), and an ``imprecise`` flag when one is below
    precise_group_size. Plan version 1 registers no such rule."""
    if s.min_group_size is None:
        return None, []
    small = stats.small_groups(sizes, s.min_group_size)
    if small:
        return small, []
    loose = [f"{size} {name}" for name, size in sizes.items() if size < s.precise_group_size]
    return None, [f"imprecise: {', '.join(loose)} (< precise_group_size {s.precise_group_size})"] if loose else []


_constant_reason = stats.constant_reason


def h1_shape_contrast(d: CellData, idx: np.ndarray | None, s: Settings) -> tuple[dict, np.ndarray | None]:
    """H1: accuracy gap monotone minus non-monotone (pp), its bootstrap CI, odds ratio and
    one-sided Fisher p (seed 003 sections 3.4 and 4.1). Also returns the gap resamples for H4.
    Null, with the reason, when a group is empty or every usable problem has the same label."""
    n_mono = int(d.monotone.sum())
    acc_in, acc_out = stats.group_accuracy_rows(d.monotone, d.correct, stats.full_sample(d.n))
    # the gap and its reason are stats.gap_pp's, the one definition summary.json and the sweeps share
    gap, gap_reason = stats.gap_pp(d.monotone, d.correct, s.min_group_size, d.n_excluded)
    notes = [gap_reason] if gap_reason else []
    # a constant label makes the gap 0 by construction, not an estimate (nor its CI [0, 0])
    defined = d.n and not stats.gap_undefined(d.monotone, d.correct)
    _, flags = group_rule({"monotone": n_mono, "non-monotone": d.n - n_mono}, s) if defined else (None, [])
    # The exact test stays valid on a small group; the gap and its CI are not estimates there.
    estimated = gap is not None
    resamples = None
    interval = Interval(None, None, 0, 0)
    odds_ratio = p_fisher = None
    if estimated:
        resamples = 100 * stats.accuracy_gap_rows(d.monotone, d.correct, idx)
        interval = stats.percentile_interval(resamples, s.level)
        flags += kept_flags(interval, s)
    elif idx is not None:
        interval = Interval(None, None, 0, idx.shape[0])
    if defined:
        odds_ratio, p_fisher = stats.fisher_test(d.monotone, d.correct, s.alternatives["fisher"])
        if not math.isfinite(odds_ratio):
            notes.append("odds ratio undefined or infinite (a zero cell in the 2x2 table)")
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
        "flags": flags,
        "reason": _reason(notes),
    }, resamples


def _spearman_block(
    x: np.ndarray, correct: np.ndarray, idx: np.ndarray | None, s: Settings, name: str, alternative: str
) -> dict:
    reason = None if x.size >= 3 else f"{x.size} usable problems (a rank correlation needs >= 3)"
    reason = reason or _constant_reason(name, x) or _constant_reason("correct", correct.astype(float))
    block = {
        "rho": None,
        "ci": [None, None],
        "ci_n_kept": 0,
        "ci_resamples": s.resamples,
        "p_spearman": None,
        "alternative": alternative,
        "n": int(x.size),
        "flags": [],
        "reason": reason,
    }
    if reason:
        return block
    # The test stays defined on a small group; rho and its CI are not estimates there.
    block["p_spearman"] = _num(stats.spearman_p(x, correct, alternative))
    n_correct = int(correct.sum())
    small, flags = group_rule({"correct": n_correct, "incorrect": int(x.size) - n_correct}, s)
    if small:
        return block | {"reason": small}
    interval = stats.percentile_interval(stats.spearman_binary_rows(x, correct, idx), s.level)
    return block | {
        "rho": _num(stats.spearman_binary(x, correct)),
        **_ci_fields(interval),
        "flags": flags + kept_flags(interval, s),
    }


def h2_magnitude_null(d: CellData, idx: np.ndarray | None, s: Settings) -> dict:
    """H2: Spearman rho of coherence C = H_0 - H_N with correctness, with CI (seed 003 section 4.2)."""
    return _spearman_block(d.coherence, d.correct, idx, s, "coherence", s.alternatives["H2"])


def violation_buckets(violations: np.ndarray, correct: np.ndarray, s: Settings | None = None) -> list[dict]:
    """Accuracy by violation count 0, 1, 2, >=3 (seed 003 section 4.3); an empty bucket has no accuracy,
    nor has one below the plan's min_group_size (with its reason), and one below precise_group_size
    is flagged."""
    bucket = np.minimum(violations, 3).astype(int)
    out = []
    for b, label in enumerate(H3_BUCKETS):
        members = bucket == b
        n = int(members.sum())
        row = {"bucket": label, "n": n, "accuracy": _num(correct[members].mean()) if n else None}
        if s is not None and s.min_group_size is not None:
            small, flags = group_rule({"problems": n}, s)
            row.update(accuracy=None if small else row["accuracy"], flags=flags, reason=small)
        out.append(row)
    return out


def h3_graded_signal(d: CellData, idx: np.ndarray | None, s: Settings) -> dict:
    """H3: Spearman rho of the violation count with correctness, with CI, and accuracy by bucket
    (seed 003 section 4.3)."""
    block = _spearman_block(d.violations, d.correct, idx, s, "violations", s.alternatives["H3"])
    block["buckets"] = violation_buckets(d.violations, d.correct, s)
    return block


H5_KEYS = (
    "baseline_coverage",
    "k",
    "n_test",
    "n_train",
    "fp_baseline",
    "fp_filter",
    "reduction_pp",
    "ci",
    "ci_n_kept",
    "ci_resamples",
    "tie_rule",
    "tie_draws",
    "as_run",
    "model",
    "flags",
)


def _h5_undefined(reason: str, **known: Any) -> dict:
    block = {key: None for key in H5_KEYS}
    block["ci"] = [None, None]
    block["flags"] = []
    block.update(known, reason=reason)
    return block


def _probability_by_feature_row(model, features: np.ndarray) -> np.ndarray:
    # Scoring each distinct feature row once makes identical rows bit-identical ties, whatever
    # path the linear algebra takes for each row.
    unique, inverse = np.unique(features, axis=0, return_inverse=True)
    return model.predict_proba(unique)[:, 1][inverse.reshape(-1)]


H5_MODEL_KINDS = ("logistic_regression",)
H5_SCALINGS = ("none", "standard")


def h5_model(spec: dict):
    """The registered H5 filter (plan ``analysis.h5.model``) as an unfitted sklearn estimator."""
    if spec.get("kind") not in H5_MODEL_KINDS:
        raise ValueError(f"analysis.h5.model.kind: unknown model {spec.get('kind')!r} (known: {H5_MODEL_KINDS})")
    scaling = spec.get("scaling", "none")
    if scaling not in H5_SCALINGS:
        raise ValueError(f"analysis.h5.model.scaling: unknown scaling {scaling!r} (known: {H5_SCALINGS})")
    if spec.get("penalty", "l2") != "l2":
        raise ValueError(f"analysis.h5.model.penalty: only l2 is supported, got {spec.get('penalty')!r}")
    from sklearn.linear_model import LogisticRegression  # scikit-learn loads in seconds: only H5's fit pays
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    # l2 is LogisticRegression's default penalty; naming it is deprecated from scikit-learn 1.8 on.
    params = {k: v for k, v in spec.items() if k not in ("kind", "scaling", "penalty")}
    model = LogisticRegression(**params)
    return make_pipeline(StandardScaler(), model) if scaling == "standard" else model


def _logistic(model):
    return model.steps[-1][1] if hasattr(model, "steps") else model


def h5_triage_filter(d: CellData, s: Settings, idx: np.ndarray | None = None) -> dict:
    """H5: logistic filter vs the bare monotone flag at exactly matched coverage (seed 003 section 4.5).

    Stratified train/test split; the filter (the plan's analysis.h5.model) accepts
    k = round(baseline coverage x n_test) test problems by descending P(correct). A tie at the cut
    is broken uniformly at random: under the plan's tie_rule ``expected`` (plan version 2) its exact
    expectation scores the point estimate and every bootstrap resample alike; under ``draws``
    (version 1) the point estimate averages seeded draws. The CI resamples the test split with the
    model held fixed, as the split was drawn (``stats.stratified_split_resamples``): row r of the
    cell's own resample matrix ``idx`` (``stats.cell_resamples``) sets that resample's share of
    correct problems, and each class is resampled among the test problems of that class. A test split
    or monotone group below the plan's min_group_size gives no estimate. The as-run quantile
    threshold is reported beside it with its coverage overshoot.
    """
    n_correct = int(d.correct.sum())
    n_wrong = d.n - n_correct
    if min(n_correct, n_wrong) < 2:
        return _h5_undefined(
            f"a stratified split needs >= 2 correct and >= 2 incorrect problems; have {n_correct} and {n_wrong}"
        )
    from sklearn.model_selection import train_test_split

    try:
        x_train, x_test, y_train, y_test, _, mono_test, _, test_rows = train_test_split(
            d.features, d.correct, d.monotone, np.arange(d.n),
            train_size=s.train_fraction, stratify=d.correct, random_state=s.split_seed,
        )  # fmt: skip
    except ValueError as err:  # sklearn explains which class or split is too small
        return _h5_undefined(f"stratified split impossible: {err}")
    model = h5_model(s.model).fit(x_train, y_train)
    fitted = {
        "features": list(s.features),
        "coefficients": [_num(c) for c in _logistic(model).coef_[0]],
        "intercept": _num(_logistic(model).intercept_[0]),
    }
    n_test = int(y_test.size)
    k = int(round(mono_test.mean() * n_test))
    known = {
        "n_test": n_test,
        "n_train": int(y_train.size),
        "k": k,
        "model": fitted,
        "baseline_coverage": _num(k / n_test),
        "tie_rule": s.tie_rule,
        "tie_draws": s.tie_draws,
    }
    if k == 0:
        return _h5_undefined("no monotone chain in the test split: the baseline accepts nothing", **known)
    small, flags = group_rule({"test problems": n_test, "monotone test problems": k}, s)
    if small:
        return _h5_undefined(small, **known)

    probability = _probability_by_feature_row(model, x_test)
    tiers = stats.descending_tiers(probability)
    acc_baseline = float(y_test[mono_test].mean())
    if s.tie_rule == "draws":
        acc_filter = stats.accuracy_at_k_draws(tiers, y_test, k, s.tie_draws, s.tie_seed)
    else:  # "expected": the rule every bootstrap resample below uses, applied to the sample itself
        acc_filter = float(stats.exact_coverage_rows(tiers, mono_test, y_test, stats.full_sample(n_test))[1][0])

    if idx is None:
        idx = stats.cell_resamples(s.seed, d.cell, d.n, s.resamples)
    member, tier_all = np.zeros(d.n, dtype=bool), np.zeros(d.n, dtype=np.int64)
    member[test_rows], tier_all[test_rows] = True, tiers
    split = stats.stratified_split_resamples(idx, member, d.correct, stats.derive_seed(s.seed, d.cell, "H5 test split"))
    acc_baseline_rows, acc_filter_rows = stats.exact_coverage_rows(tier_all, d.monotone, d.correct, split, member)
    interval = stats.percentile_interval(100 * (acc_filter_rows - acc_baseline_rows), s.level)
    flags += kept_flags(interval, s)

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
        "flags": flags,
        "reason": None,
    }


def cell_counts(d: CellData) -> dict:
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
