"""Wall time of the registered analysis at the paper's panel size, and the vectorized bootstrap
against a plain per-resample loop (docs/reference.md sections 5 and 10: speed is measured here, not in tests).

    python benchmarks/bench_analysis.py [--repeats 3]

Targets: analyze() under 30 s on 2 cores; the vectorized bootstrap at least 20x the loop.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy import stats as sps

from cotdyn import stats
from cotdyn.analysis.calibration import paper_panel, simulate_panel
from cotdyn.analysis.hypotheses import analyze
from cotdyn.plan.load import load_plan, plan_sha256

PLAN = Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml"


def bootstrap_vectorized(mono, correct, violations, coherence, idx, level):
    """H1 gap and H2/H3 Spearman intervals as cotdyn.analysis.hypotheses computes them."""
    gap = stats.percentile_interval(100 * stats.accuracy_gap_rows(mono, correct, idx), level)
    h2 = stats.percentile_interval(stats.spearman_binary_rows(coherence, correct, idx), level)
    h3 = stats.percentile_interval(stats.spearman_binary_rows(violations, correct, idx), level)
    return gap, h2, h3


def bootstrap_loop(mono, correct, violations, coherence, idx, level):
    """The same bootstrap, one resample at a time with numpy and scipy.stats.spearmanr."""
    gaps, rho2, rho3 = [], [], []
    for row in idx:
        m, c = mono[row], correct[row]
        gaps.append(100 * (c[m].mean() - c[~m].mean()) if 0 < m.sum() < m.size else np.nan)
        constant = c.min() == c.max()
        rho2.append(np.nan if constant else sps.spearmanr(coherence[row], c).statistic)
        rho3.append(np.nan if constant else sps.spearmanr(violations[row], c).statistic)
    return tuple(stats.percentile_interval(np.array(v), level) for v in (gaps, rho2, rho3))


def timed(fn, *args, repeats: int = 1):
    """Best wall time of ``repeats`` calls (the least disturbed by other load) and the output."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    plan = load_plan(PLAN)
    sha = plan_sha256(PLAN)
    records = simulate_panel(paper_panel(), seed=20260829)
    print(
        f"panel: {records['cell'].nunique()} cells, {len(records)} records; "
        f"{os.cpu_count()} CPUs visible; resamples {plan['analysis']['bootstrap']['resamples']}"
    )

    times = [timed(analyze, records, plan, sha)[0] for _ in range(args.repeats)]
    print(f"analyze(): first {times[0]:.2f} s, median of {args.repeats} {np.median(times):.2f} s (target < 30 s)")

    boot = plan["analysis"]["bootstrap"]
    rows = records[(records["cell"] == "qwen7b-gsm8k") & ~records["excluded"]]
    arrays = (
        rows["monotone"].to_numpy(bool),
        rows["correct"].to_numpy(bool),
        rows["violations"].to_numpy(float),
        rows["coherence"].to_numpy(float),
    )
    idx = stats.resample_indices(len(rows), boot["resamples"], boot["seed"])
    t_vec, vec = timed(bootstrap_vectorized, *arrays, idx, boot["level"], repeats=3)
    t_loop, loop = timed(bootstrap_loop, *arrays, idx, boot["level"], repeats=3)
    for a, b in zip(vec, loop):  # same resamples, same intervals: the comparison is like for like
        np.testing.assert_allclose([a.lo, a.hi], [b.lo, b.hi], rtol=1e-9)
        assert a.n_kept == b.n_kept
    print(
        f"H1-H3 bootstrap on qwen7b-gsm8k (n={len(rows)}, {boot['resamples']} resamples, best of 3): "
        f"vectorized {t_vec * 1000:.0f} ms, loop {t_loop * 1000:.0f} ms, ratio {t_loop / t_vec:.0f}x (target >= 20x)"
    )
    t_gap_vec, _ = timed(lambda: stats.accuracy_gap_rows(arrays[0], arrays[1], idx), repeats=3)
    t_gap_loop, _ = timed(
        lambda: [arrays[1][r][arrays[0][r]].mean() - arrays[1][r][~arrays[0][r]].mean() for r in idx], repeats=3
    )
    print(
        f"gap alone: vectorized {t_gap_vec * 1000:.1f} ms, loop {t_gap_loop * 1000:.1f} ms, "
        f"ratio {t_gap_loop / t_gap_vec:.0f}x"
    )


if __name__ == "__main__":
    main()
