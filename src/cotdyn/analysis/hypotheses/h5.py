"""H5: the triage filter against the bare monotone flag at matched coverage (seed 003 section 4.5),
and the rules that keep its interval honest where it cannot estimate (plan version 3)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cotdyn import stats
from cotdyn.analysis.hypotheses.cells import _ci_fields, group_rule, kept_flags, zero_width_rule
from cotdyn.analysis.hypotheses.inputs import CellData, Settings
from cotdyn.stats import finite_or_none

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
        "coefficients": [finite_or_none(c) for c in _logistic(model).coef_[0]],
        "intercept": finite_or_none(_logistic(model).intercept_[0]),
    }
    n_test = int(y_test.size)
    k = int(round(mono_test.mean() * n_test))
    known = {
        "n_test": n_test,
        "n_train": int(y_train.size),
        "k": k,
        "model": fitted,
        "baseline_coverage": finite_or_none(k / n_test),
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

    degenerate = h5_degenerate(k, n_test, acc_baseline, s)
    if degenerate:
        return _h5_undefined(degenerate, **known)
    member, tier_all = np.zeros(d.n, dtype=bool), np.zeros(d.n, dtype=np.int64)
    member[test_rows], tier_all[test_rows] = True, tiers
    split = h5_ci_resamples(d, s, idx, member, test_rows)
    acc_baseline_rows, acc_filter_rows = stats.exact_coverage_rows(tier_all, d.monotone, d.correct, split, member)
    interval = stats.percentile_interval(100 * (acc_filter_rows - acc_baseline_rows), s.level, s.quantile_rule)
    flags += kept_flags(interval, s)
    discordant = discordant_minority(tiers, k, mono_test, y_test)
    trusted, more = h5_interval_rule(discordant, s)
    # plan v4 (verdict_rule.zero_width names H5): [x, x] decides nothing, whatever the discordant count
    zero_width = zero_width_rule(interval, s, "H5")
    flags += more + zero_width.get("flags", [])
    trusted = trusted and zero_width.get("ci_trusted", True)
    judged = s.min_discordant_minority is not None or bool(zero_width)

    threshold = float(np.quantile(probability, 1 - k / n_test))
    accepted = probability >= threshold
    acc_as_run = float(y_test[accepted].mean())
    return {
        **known,
        "fp_baseline": finite_or_none(1 - acc_baseline),
        "fp_filter": finite_or_none(1 - acc_filter),
        "reduction_pp": finite_or_none(100 * (acc_filter - acc_baseline)),
        **_ci_fields(interval),
        **({"discordant_minority": discordant, "ci_trusted": trusted} if judged else {}),
        "as_run": {
            "threshold": finite_or_none(threshold),
            "coverage": finite_or_none(accepted.mean()),
            "coverage_overshoot": finite_or_none(accepted.mean() - k / n_test),
            "fp": finite_or_none(1 - acc_as_run),
            "reduction_pp": finite_or_none(100 * (acc_as_run - acc_baseline)),
        },
        "flags": flags,
        "reason": None,
    }


def h5_ci_resamples(d: CellData, s: Settings, idx: np.ndarray | None, member: np.ndarray, test_rows) -> np.ndarray:
    """The resamples of H5's test split (cell indices), by the plan's analysis.h5.ci_resampling:
    ``stratified_split`` (version 3) as the split was drawn (``stats.stratified_split_resamples``);
    ``cell_matrix`` (version 2) the test problems each row of the cell's one matrix drew;
    ``test_split_stream`` (version 1) the test split resampled from its own stream."""
    if s.ci_resampling == "test_split_stream":
        n_test = len(test_rows)
        return np.asarray(test_rows)[
            stats.resample_indices(n_test, s.resamples, stats.derive_seed(s.seed, d.cell, "H5"))
        ]
    if idx is None:
        idx = stats.cell_resamples(s.seed, d.cell, d.n, s.resamples)
    if s.ci_resampling == "cell_matrix":
        return idx
    return stats.stratified_split_resamples(idx, member, d.correct, stats.derive_seed(s.seed, d.cell, "H5 test split"))


def h5_degenerate(k: int, n_test: int, acc_baseline: float, s: Settings) -> str | None:
    """Why H5 is not an estimate where its reduction is fixed by construction (plan version 3,
    analysis.degenerate): the baseline keeps the whole test split, or none of its problems is a false
    positive (every resample's reduction is then <= 0 whatever the filter does)."""
    if s.degenerate != "not_estimable":
        return None
    if k == n_test:
        return f"the baseline keeps the whole test split (k = n_test = {n_test}): the filter keeps the same problems"
    if acc_baseline == 1.0:
        return (
            f"no false positive among the baseline's {k} monotone test problems: the reduction cannot exceed 0 "
            "whatever the filter does"
        )
    return None


def discordant_minority(tiers: np.ndarray, k: int, monotone: np.ndarray, correct: np.ndarray) -> int:
    """Test problems of the split's minority label on which filter and baseline disagree (the filter's
    acceptance, ties shared, differs from the monotone flag): the information H5's interval rests on."""
    disagree = stats.accepted_share(tiers, k) != monotone.astype(float)
    minority = bool(correct.mean() < 0.5)
    return int((disagree & (correct == minority)).sum())


def h5_interval_rule(discordant: int, s: Settings) -> tuple[bool, list[str]]:
    """Whether H5's interval may decide (plan analysis.h5.min_discordant_minority, version 3), with its
    flag: below the threshold of discordant minority-label test problems the interval under-covers
    (docs/reference.md section 5, the grid). A test split on which filter and baseline agree gives
    [0, 0]; that is no exact zero: the filter still differs from the baseline on problems the split
    lacks (in the grid such cells covered the fitted filter's reduction 25% of the time at pi = 0.9,
    n = 150), so it is flagged as well."""
    if s.min_discordant_minority is None:
        return True, []
    if discordant < s.min_discordant_minority:
        return False, [
            f"imprecise: {discordant} discordant minority-label test problems (< min_discordant_minority "
            f"{s.min_discordant_minority}): the interval under-covers, the cell's verdict is not_estimable"
        ]
    return True, []
