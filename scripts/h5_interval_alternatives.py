"""Intervals for H5 other than the registered bootstrap, measured on the grid's own cells (issue 33).

At the grid's acceptance settings (pi = 0.9, n = 150 and pi = 0.5, n = 1,319; scripts/calibrate_analysis.py
``--only h5grid``), each simulated cell is drawn with the seed the grid gives it, so the figures here
pair cell by cell with the grid's bootstrap figures. For each cell the test split, the fitted filter
and its truth (``h5_planted_reduction_pp``) are those of ``h5_triage_filter``; the point estimate is
unchanged. Two score intervals on the paired false positives of the test split are computed, each
rescaled to pp by n_test / k (the reduction is (b - c) / k, where b counts the baseline's false
positives the filter rejects and c the filter's false positives the baseline rejects, a tie at the cut
counted at its expected share):

- ``tango``: Tango's (1998) score interval for a difference of paired proportions (b - c) / n_test;
- ``newcombe``: Newcombe's (1998) hybrid score interval (his method 10) from the two Wilson intervals.

Measured, not registered: nothing in the analysis reads this file. Seeded; prints its figures.
    python scripts/h5_interval_alternatives.py [--lopsided-cells 10000] [--cells 1000] [--seed 20260829]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_analysis import ACCEPTANCE, PLAN, THRESHOLDS, grid_cell_data, grid_processes  # noqa: E402

from cotdyn import stats  # noqa: E402
from cotdyn.analysis.calibration import h5_planted_reduction_pp, population_baseline  # noqa: E402
from cotdyn.analysis.hypotheses import Settings  # noqa: E402
from cotdyn.analysis.hypotheses.h5 import _probability_by_feature_row, h5_model, h5_triage_filter  # noqa: E402
from cotdyn.plan.load import load_plan  # noqa: E402


def tango_interval(b: float, c: float, n: float, z: float) -> tuple[float, float]:
    """Tango's score interval for p12 - p21 from b = x12 and c = x21 of n pairs: the deltas whose
    score statistic, with p21 at its constrained maximum-likelihood value, lies within +-z."""
    from scipy.optimize import brentq

    def score(delta: float) -> float:
        big_b = -b - c + (2 * n - b + c) * delta
        q21 = (-big_b + np.sqrt(max(big_b**2 + 8 * n * c * delta * (1 - delta), 0.0))) / (4 * n)
        var, gap = n * (2 * q21 + delta * (1 - delta)), b - c - n * delta
        return gap / np.sqrt(var) if var > 0 else (0.0 if gap == 0 else np.sign(gap) * np.inf)

    edge, mid = 1e-12, (b - c) / n  # the score falls in delta: one root each side of the estimate
    lo = -1.0 if score(-1 + edge) <= z else brentq(lambda x: score(x) - z, -1 + edge, mid)
    hi = 1.0 if score(1 - edge) >= -z else brentq(lambda x: score(x) + z, mid, 1 - edge)
    return lo, hi


def newcombe_interval(both: float, b: float, c: float, n: float, level: float) -> tuple[float, float]:
    """Newcombe's method 10 for (both + b) / n - (both + c) / n: the Wilson intervals of the two
    proportions combined with the phi correlation of the paired table."""
    from statsmodels.stats.proportion import proportion_confint

    neither = n - both - b - c
    p1, p2 = (both + b) / n, (both + c) / n
    l1, u1 = proportion_confint(both + b, n, alpha=1 - level, method="wilson")
    l2, u2 = proportion_confint(both + c, n, alpha=1 - level, method="wilson")
    margins = (both + b) * (c + neither) * (both + c) * (b + neither)
    phi = (both * neither - b * c) / np.sqrt(margins) if margins > 0 else 0.0
    lower = np.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    upper = np.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return p1 - p2 - lower, p1 - p2 + upper


def paired_false_positives(d, s: Settings) -> tuple[float, float, float, int, int, float]:
    """(both, b, c, n_test, k, reduction_pp) of the cell's test split: h5_triage_filter's split and fit."""
    from sklearn.model_selection import train_test_split

    x_train, x_test, y_train, y_test, _, mono, _, _ = train_test_split(
        d.features, d.correct, d.monotone, np.arange(d.n),
        train_size=s.train_fraction, stratify=d.correct, random_state=s.split_seed,
    )  # fmt: skip
    model = h5_model(s.model).fit(x_train, y_train)
    n_test = y_test.size
    k = int(round(mono.mean() * n_test))
    accepted = stats.accepted_share(stats.descending_tiers(_probability_by_feature_row(model, x_test)), k)
    wrong, flag = 1.0 - y_test, mono.astype(float)
    both, b, c = (
        (flag * accepted * wrong).sum(),
        (flag * (1 - accepted) * wrong).sum(),
        ((1 - flag) * accepted * wrong).sum(),
    )
    return both, b, c, n_test, k, 100 * (b - c) / k


def alternative_cell(population, n: int, s: Settings, seed: int, coverage: float, acc_monotone: float) -> dict:
    # The block (with a token bootstrap: its interval is not read) says whether the cell is estimable,
    # and gives the fitted filter whose truth is measured and the count the flagging rule reads.
    d = grid_cell_data(population, n, seed)
    block = h5_triage_filter(d, replace(s, seed=seed, resamples=10))
    if block["ci"][0] is None:
        return {"estimable": False}
    both, b, c, n_test, k, reduction = paired_false_positives(d, s)
    if not np.isclose(reduction, block["reduction_pp"], atol=1e-9):
        raise AssertionError(f"the re-drawn split gives {reduction}, h5_triage_filter {block['reduction_pp']}")
    m = block["model"]
    truth = h5_planted_reduction_pp(population, m["coefficients"], m["intercept"], coverage, acc_monotone)
    from scipy.stats import norm

    z = float(norm.ppf(1 - (1 - s.level) / 2))
    intervals = {"tango": tango_interval(b, c, n_test, z), "newcombe": newcombe_interval(both, b, c, n_test, s.level)}
    row = {"estimable": True, "discordant": block["discordant_minority"]}
    for name, (lo, hi) in intervals.items():
        lo, hi = 100 * n_test / k * lo, 100 * n_test / k * hi
        row[f"{name}_covered"] = bool(lo - 1e-9 <= truth <= hi + 1e-9)
        row[f"{name}_above"] = bool(truth > hi + 1e-9)
        row[f"{name}_width"] = hi - lo
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lopsided-cells", type=int, default=10000, help="cells at pi=0.9, n=150")
    parser.add_argument("--cells", type=int, default=1000, help="cells at pi=0.5, n=1319")
    parser.add_argument("--seed", type=int, default=20260829, help="as calibrate_analysis.py's --seed")
    args = parser.parse_args()
    s = replace(Settings.from_plan(load_plan(PLAN)), min_discordant_minority=0)
    seed = args.seed + 4  # the grid's seed (calibrate_analysis.h5_grid_section)
    print(
        f"H5 score intervals on the grid's cells: seed {seed}; coverage in % (MC se), share above the interval, mean width pp"
    )
    for pi, n in ACCEPTANCE:
        for name, population in grid_processes(pi).items():
            start, coverage, acc_monotone = time.perf_counter(), *population_baseline(population)
            rows = []
            for i in range(args.lopsided_cells if (pi, n) == (0.9, 150) else args.cells):
                cell_seed = stats.derive_seed(seed, "grid", name, str(pi), str(n), str(i))
                rows.append(alternative_cell(population, n, s, cell_seed, coverage, acc_monotone))
            print(
                f"  {name} pi={pi} n={n}: {len(rows)} cells, {sum(not r['estimable'] for r in rows)} not estimable, {time.perf_counter() - start:.0f} s"
            )
            estimable = [r for r in rows if r["estimable"]]
            for threshold in THRESHOLDS:
                kept = [r for r in estimable if r["discordant"] >= threshold]
                print(
                    f"    unflagged at >= {threshold}: {len(kept):5d} cells"
                    + "".join(_summary(kept, m) for m in ("tango", "newcombe"))
                )


def _summary(rows: list[dict], method: str) -> str:
    if not rows:
        return f"  {method} -"
    rate = np.mean([r[f"{method}_covered"] for r in rows])
    above = np.mean([r[f"{method}_above"] for r in rows])
    width = np.mean([r[f"{method}_width"] for r in rows])
    return f"  {method} {100 * rate:5.1f} ({100 * np.sqrt(rate * (1 - rate) / len(rows)):.1f}) above {100 * above:.1f} width {width:.1f}"


if __name__ == "__main__":
    main()
