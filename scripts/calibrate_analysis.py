"""Calibration of the registered analysis by simulation with planted truths (docs/reference.md section 10).

1. Coverage of the 95% percentile bootstrap CI of the H1 accuracy gap (1000 problem-level
   resamples, as registered) over many simulated cells with a planted gap.
2. Family-wise error rate of Holm over the registered 4-member family (H1 Fisher and H3 Spearman
   on two anchor-sized cells) under a global null, beside the uncorrected rate.
3. Error rate of the verdict rule as a whole (plan verdict_rule: CI criterion and Holm) over H1 and
   H3 on the two anchor cells, through cotdyn.analysis.hypotheses' own cell, Holm and verdict functions
   with the registered bootstrap: the share of simulated panels in which a false hypothesis is declared
   supported, under the global null and with H1 true on GSM8K only (its claim is both datasets).
4. Coverage of H5's 95% percentile CI through h5_triage_filter over simulated anchor-sized cells: the
   truth of each is the reduction its fitted filter achieves on the exact population law of the
   features (cotdyn.analysis.calibration.feature_population, h5_planted_reduction_pp).
5. H5 over a grid (pi x n x four feature laws; ``--grid-settings acceptance``: only issue 33's two
   acceptance settings): coverage of unflagged intervals at each flagging threshold, with MC se.
6. ``--only grid,h3-size`` (plan v4, issue 49; cotdyn.analysis.calibration_grid): H1-H5 over two
   processes x accuracy x n, flagged vs unflagged; H3's size under the null with ties.

Uses the same functions as cotdyn.analysis.hypotheses. Seeded; prints its settings and figures.
    python scripts/calibrate_analysis.py [--seed 20260829] [--only gap,holm,verdict,h5,h5grid,grid,h3-size]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

# Thousands of tiny fits and bootstraps: BLAS threads only contend (on 2 shared cores they tripled
# the run time); set before numpy loads its BLAS.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from cotdyn import stats
from cotdyn.analysis import calibration_grid as grid
from cotdyn.analysis.calibration import (
    PlantedCell,
    correlated_population,
    feature_population,
    h5_planted_reduction_pp,
    heavy_ties_population,
    population_baseline,
    sample_population,
    simulate_labels,
)
from cotdyn.analysis.calibration_size import h3_size, h3_tests
from cotdyn.analysis.hypotheses import Settings
from cotdyn.analysis.hypotheses.cells import h1_shape_contrast, h3_graded_signal
from cotdyn.analysis.hypotheses.h5 import h5_triage_filter
from cotdyn.analysis.hypotheses.inputs import CellData
from cotdyn.analysis.hypotheses.verdicts import holm_family, hypothesis_verdict
from cotdyn.plan.load import load_plan

PLAN = Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml"


def gap_ci_coverage(truth: PlantedCell, cells: int, resamples: int, level: float, seed: int) -> dict:
    """Share of simulated cells whose gap CI contains the planted gap."""
    rng = np.random.default_rng(seed)
    covered, kept, widths = 0, 0, []
    for i in range(cells):
        labels = simulate_labels(truth, rng)
        idx = stats.resample_indices(truth.n, resamples, stats.derive_seed(seed, "cell", str(i)))
        interval = stats.percentile_interval(100 * stats.accuracy_gap_rows(labels.monotone, labels.correct, idx), level)
        covered += interval.lo <= truth.gap_pp <= interval.hi
        kept += interval.n_kept
        widths.append(interval.hi - interval.lo)
    rate = covered / cells
    return {
        "rate": rate,
        "se": np.sqrt(rate * (1 - rate) / cells),
        "mean_kept": kept / cells,
        "mean_width_pp": float(np.mean(widths)),
    }


def holm_fwer(null_cells: list[PlantedCell], families: int, alpha: float, seed: int, alternatives: dict) -> dict:
    """Family-wise error of Holm (and of no correction) over H1 and H3 on each null cell."""
    rng = np.random.default_rng(seed)
    any_holm = any_raw = 0
    for _ in range(families):
        # Both registered tests of a cell are computed on the same simulated cell, as in the real family.
        p = []
        for truth in null_cells:
            labels = simulate_labels(truth, rng)
            p.append(stats.fisher_test(labels.monotone, labels.correct, alternatives["fisher"])[1])
            p.append(stats.spearman_p(labels.violations, labels.correct, alternatives["H3"]))
        p = [1.0 if not np.isfinite(x) else x for x in p]
        reject, _ = stats.holm(p, alpha)
        any_holm += bool(reject.any())
        any_raw += bool((np.asarray(p) < alpha).any())
    fwer = any_holm / families
    return {"holm": fwer, "se": np.sqrt(fwer * (1 - fwer) / families), "uncorrected": any_raw / families}


ANCHOR = ("qwen7b-gsm8k", "qwen7b-math500")


def _cell_data(cell: str, labels) -> CellData:
    used = ~labels.excluded
    violations = labels.violations[used].astype(float)
    features = np.column_stack([violations, labels.final_confidence[used]])
    return CellData(
        cell, labels.excluded.size, int(labels.excluded.sum()), labels.monotone[used], labels.correct[used],
        violations, violations, features, labels.n_points[used].astype(float), None, None,
    )  # fmt: skip


def verdict_rule_error(truths: dict, false_claims: set, panels: int, plan: dict, seed: int) -> dict:
    """Share of simulated anchor panels in which a false hypothesis (H1 or H3) is declared supported
    by the plan's verdict rule, beside the share under the CI criterion alone; and per hypothesis
    and per cell, the share of each declared supported (``supported``: what the power analysis's
    null world tallies, tests/test_power.py)."""
    s = Settings.from_plan(plan)
    hypotheses = [dict(h, cells=list(ANCHOR)) for h in plan["hypotheses"] if h["id"] in false_claims]
    rng = np.random.default_rng(seed)
    errors = ci_only = 0
    supported = {(h["id"], c): 0 for h in hypotheses for c in ("all", *ANCHOR)}
    for i in range(panels):
        cells = {}
        for cell, truth in truths.items():
            d = _cell_data(cell, simulate_labels(truth, rng))
            idx = stats.resample_indices(d.n, s.resamples, stats.derive_seed(seed, "panel", str(i), cell))
            cells[cell] = {"H1": h1_shape_contrast(d, idx, s)[0], "H3": h3_graded_signal(d, idx, s)}
        holm = holm_family(plan, cells, s.undefined_p)
        entries = [hypothesis_verdict(h, cells, {}, holm, s) for h in hypotheses]
        errors += any(e["verdict"] == "supported" for e in entries)
        ci_only += any(e["ci_criterion"] == "supported" for e in entries)
        for h, e in zip(hypotheses, entries):
            supported[h["id"], "all"] += e["verdict"] == "supported"
            for c in ANCHOR:
                supported[h["id"], c] += e["cells"][c]["verdict"] == "supported"
    rate = errors / panels
    shares = {
        key: {"rate": k / panels, "se": np.sqrt(k / panels * (1 - k / panels) / panels)} for key, k in supported.items()
    }
    return {"rate": rate, "se": np.sqrt(rate * (1 - rate) / panels), "ci_only": ci_only / panels, "supported": shares}


def h5_ci_coverage(truth: PlantedCell, cell: str, cells: int, plan: dict, seed: int) -> dict:
    """Share of simulated cells whose H5 CI contains the reduction their own fitted filter achieves
    on the population (``h5_planted_reduction_pp``); cells without an estimate are counted apart."""
    s = Settings.from_plan(plan)
    if s.model.get("scaling", "none") != "none" or list(s.features) != ["violations", "final_confidence"]:
        raise ValueError("the H5 calibration reads raw coefficients of (violations, final_confidence)")
    population = feature_population(truth)
    rng = np.random.default_rng(seed)
    covered = defined = 0
    widths, truths = [], []
    for i in range(cells):
        d = _cell_data(cell, simulate_labels(truth, rng))
        # each simulated cell its own bootstrap seed, so both stages of its resamples are its own
        block = h5_triage_filter(d, replace(s, seed=stats.derive_seed(seed, "h5", str(i))))
        if block["ci"][0] is None:
            continue
        model = block["model"]
        planted = h5_planted_reduction_pp(
            population, model["coefficients"], model["intercept"], truth.coverage, truth.acc_monotone
        )
        defined += 1
        covered += block["ci"][0] <= planted <= block["ci"][1]
        widths.append(block["ci"][1] - block["ci"][0])
        truths.append(planted)
    rate = covered / defined if defined else float("nan")
    return {
        "rate": rate,
        "se": np.sqrt(rate * (1 - rate) / defined) if defined else float("nan"),
        "defined": defined,
        "mean_width_pp": float(np.mean(widths)) if widths else float("nan"),
        "mean_truth_pp": float(np.mean(truths)) if truths else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("--cells", 2000), ("--families", 10000), ("--panels", 1000), ("--h5-cells", 1000)):
        parser.add_argument(name, type=int, default=default)
    parser.add_argument("--seed", type=int, default=20260829)
    parser.add_argument("--grid-cells", type=int, default=300, help="H5 grid: cells per setting")
    parser.add_argument("--grid-acceptance-cells", type=int, default=2000, help="H5 grid: cells at pi=0.5, n=1319")
    parser.add_argument("--grid-lopsided-cells", type=int, help="H5 grid: at pi=0.9, n=150 (default: as above)")
    parser.add_argument("--grid-settings", choices=("all", "acceptance"), default="all", help="H5 grid: settings")
    parser.add_argument("--grid-out", type=Path, help="H5 grid: write every cell's outcome here (CSV)")
    add_grid_arguments(parser)  # --v4-*, --size-*
    parser.add_argument("--only", default="gap,holm,verdict,h5,h5grid", help="comma-separated parts to run")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    # statsmodels' Holm calls gc.collect() on every call; freezing the (large, import-time) heap
    # makes that cheap, so the family loop can use the pipeline's own stats.holm.
    gc.freeze()
    plan = load_plan(PLAN)
    boot = plan["analysis"]["bootstrap"]
    alpha = float(plan["holm"]["alpha"])
    settings = [("n=1000, coverage 0.50, accuracy 0.80 vs 0.70", PlantedCell(1000, 0.50, 0.80, 0.70)),
                ("n=500, coverage 0.30, accuracy 0.60 vs 0.40", PlantedCell(500, 0.30, 0.60, 0.40))]  # fmt: skip
    if "gap" in parts:
        gap_section(settings, args, boot)
    null_cells = [PlantedCell.null(1319, 0.563, 0.846), PlantedCell.null(500, 0.146, 0.505)]
    if "holm" in parts:
        holm_section(null_cells, args, plan, alpha)
    if "verdict" in parts:
        verdict_section(null_cells, args, plan, boot)
    if "h5" in parts:
        h5_section(args, plan, boot)
    if "h5grid" in parts:
        h5_grid_section(args, plan)
    run_grid_parts(parts, args, plan)  # grid, h3-size


def gap_section(settings, args, boot) -> None:
    print(
        f"H1 gap CI coverage: {args.cells} cells per setting, {boot['resamples']} resamples, "
        f"level {boot['level']}, seed {args.seed}"
    )
    for label, truth in settings:
        start = time.perf_counter()
        out = gap_ci_coverage(truth, args.cells, boot["resamples"], boot["level"], args.seed)
        print(
            f"  {label} (planted gap {truth.gap_pp:+.1f} pp): coverage {100 * out['rate']:.2f}% "
            f"(MC se {100 * out['se']:.2f}), mean CI width {out['mean_width_pp']:.2f} pp, "
            f"mean kept {out['mean_kept']:.1f}, {time.perf_counter() - start:.1f} s"
        )


def holm_section(null_cells, args, plan, alpha) -> None:
    start = time.perf_counter()
    alternatives = Settings.from_plan(plan).alternatives
    out = holm_fwer(null_cells, args.families, alpha, args.seed + 1, alternatives)
    print(
        f"Holm FWER under the global null: {args.families} families of 4 (H1 Fisher one-sided, H3 Spearman "
        f"'{alternatives['H3']}') on n=1319 (coverage 0.563, acc 0.846) and n=500 (coverage 0.146, acc 0.505), "
        f"alpha {alpha}"
    )
    print(
        f"  Holm {100 * out['holm']:.2f}% (MC se {100 * out['se']:.2f}); uncorrected any-p<alpha "
        f"{100 * out['uncorrected']:.2f}%; {time.perf_counter() - start:.1f} s"
    )


def verdict_section(null_cells, args, plan, boot) -> None:
    rule = plan["verdict_rule"]["supported_requires"]
    print(
        f"Verdict rule ({' and '.join(rule)}) over H1 and H3 on the anchor cells: {args.panels} panels per "
        f"setting, {boot['resamples']} resamples; error = a false hypothesis declared supported"
    )
    h1_gsm8k_only = {
        ANCHOR[0]: PlantedCell.from_summary(1319, 0.563, 0.846, 9.62, violation_rate_correct=0.25,
                                            violation_rate_incorrect=0.25, confidence_correct=0.7,
                                            confidence_incorrect=0.7),
        ANCHOR[1]: null_cells[1],
    }  # fmt: skip
    for label, truths in (
        ("global null (H1 and H3 false)", dict(zip(ANCHOR, null_cells))),
        (
            "H1 and H3 true on GSM8K only (violations track correctness through the flag), null on MATH-500",
            h1_gsm8k_only,
        ),
    ):
        start = time.perf_counter()
        out = verdict_rule_error(truths, {"H1", "H3"}, args.panels, plan, args.seed + 2)
        print(
            f"  {label}: verdict-rule error {100 * out['rate']:.2f}% (MC se {100 * out['se']:.2f}); "
            f"CI criterion alone {100 * out['ci_only']:.2f}%; {time.perf_counter() - start:.1f} s"
        )


def h5_section(args, plan, boot) -> None:
    print(
        f"H5 reduction CI coverage: {args.h5_cells} cells per setting, {boot['resamples']} resamples of the "
        f"test split with the model held fixed, level {boot['level']}; truth = the fitted filter on the "
        "exact feature law"
    )
    settings = [
        ("qwen7b-gsm8k", "n=1319, coverage 0.563, accuracy 0.846, gap +9.62 pp",
         PlantedCell.from_summary(1319, 0.563, 0.846, 9.62)),
        ("qwen7b-math500", "n=500, coverage 0.146, accuracy 0.505, gap +27.49 pp",
         PlantedCell.from_summary(500, 0.146, 0.505, 27.49)),
    ]  # fmt: skip
    for cell, label, truth in settings:
        start = time.perf_counter()
        out = h5_ci_coverage(truth, cell, args.h5_cells, plan, args.seed + 3)
        print(
            f"  {cell} ({label}): coverage {100 * out['rate']:.2f}% (MC se {100 * out['se']:.2f}) over "
            f"{out['defined']} cells with an estimate, mean planted reduction {out['mean_truth_pp']:+.2f} pp, "
            f"mean CI width {out['mean_width_pp']:.2f} pp, {time.perf_counter() - start:.1f} s"
        )


# --- H5 over a grid (issue 33): lopsided and small cells, heavy ties, a process not the simulator's ---

GRID_PI = (0.1, 0.5, 0.9)
GRID_N = (60, 150, 500, 1319)
THRESHOLDS = (0, 3, 4, 5, 6, 8)


def grid_processes(pi: float) -> dict:
    """The grid's feature laws at P(correct) = pi: the simulator under a null and a strong signal,
    heavy ties, and correlated features (cotdyn.analysis.calibration)."""
    return {
        "simulator null": feature_population(PlantedCell.null(100, 0.5, pi)),
        "simulator strong": feature_population(
            PlantedCell.from_summary(100, 0.5, pi, 15.0, confidence_correct=0.9, confidence_incorrect=0.4)
        ),
        "heavy ties": heavy_ties_population(pi),
        "correlated": correlated_population(pi),
    }


def grid_cell_data(population, n: int, seed: int) -> CellData:
    """One simulated cell of the grid: n problems drawn from the exact law."""
    frame = sample_population(population, n, np.random.default_rng(seed))
    violations = frame["violations"].to_numpy(dtype=float)
    return CellData(
        "grid", n, 0, frame["monotone"].to_numpy(), frame["correct"].to_numpy(dtype=bool), violations, violations,
        np.column_stack([violations, frame["final_confidence"].to_numpy(dtype=float)]), np.full(n, 5.0), None, None,
    )  # fmt: skip


def h5_grid_cell(population, n: int, s: Settings, seed: int, coverage: float, acc_monotone: float) -> dict:
    """One simulated cell of the grid through h5_triage_filter: its interval, the truth of its fitted
    filter on the exact law, and the count its interval rule reads."""
    block = h5_triage_filter(grid_cell_data(population, n, seed), replace(s, seed=seed))
    if block["ci"][0] is None:
        return {"estimable": False, "reason": block["reason"]}
    m = block["model"]
    truth = h5_planted_reduction_pp(population, m["coefficients"], m["intercept"], coverage, acc_monotone)
    lo, hi = block["ci"]
    return {
        "estimable": True,
        "covered": bool(lo - 1e-9 <= truth <= hi + 1e-9),
        "above": bool(truth > hi + 1e-9),
        "agree": block["discordant_minority"] == 0 and lo == hi == 0,
        "discordant": block["discordant_minority"],
        "width": hi - lo,
    }


ACCEPTANCE = ((0.9, 150), (0.5, 1319))  # issue 33's acceptance settings


def h5_grid(cells: dict, s: Settings, seed: int) -> list[dict]:
    """Every grid cell's outcome; ``cells`` maps (pi, n) to its cell count (absent: not run). Cell i of a
    setting has the same seed whatever the counts, so a longer run extends a shorter one."""
    rows = []
    for pi in GRID_PI:
        for name, population in grid_processes(pi).items():
            coverage, acc_monotone = population_baseline(population)
            for n in GRID_N:
                for i in range(cells.get((pi, n), 0)):
                    cell_seed = stats.derive_seed(seed, "grid", name, str(pi), str(n), str(i))
                    rows.append({"process": name, "pi": pi, "n": n,
                                 **h5_grid_cell(population, n, s, cell_seed, coverage, acc_monotone)})  # fmt: skip
    return rows


def _rate(hits: int, total: int) -> str:
    rate = hits / max(total, 1)
    return f"{100 * rate:.1f} ({100 * np.sqrt(rate * (1 - rate) / total):.1f})" if total else "-"


def grid_table(rows: list[dict], threshold: int) -> list[str]:
    """One line per setting: cells, share not estimable, share flagged (discordant minority-label
    problems below ``threshold``), coverage of the unflagged intervals with its MC se."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    lines = []
    for (process, pi, n), group in frame.groupby(["process", "pi", "n"], sort=False):
        est = group[group["estimable"]]
        trusted = est[est["discordant"] >= threshold]
        lines.append(
            f"  {process:17s} pi={pi:<4} n={n:<5} cells {len(group):5d}  not estimable {_rate(len(group) - len(est), len(group)):>10s}"
            f"  flagged {_rate(len(est) - len(trusted), len(group)):>10s}  unflagged coverage {_rate(int(trusted['covered'].sum()), len(trusted)):>10s}"
            f"  (all estimable {_rate(int(est['covered'].sum()), len(est))})"
        )
    return lines


def h5_grid_section(args, plan) -> None:
    s = Settings.from_plan(plan)
    lopsided = args.grid_acceptance_cells if args.grid_lopsided_cells is None else args.grid_lopsided_cells
    cells = {} if args.grid_settings == "acceptance" else {(pi, n): args.grid_cells for pi in GRID_PI for n in GRID_N}
    cells.update({(0.9, 150): lopsided, (0.5, 1319): args.grid_acceptance_cells})
    print(
        f"H5 over the grid: {args.grid_settings} settings of pi {GRID_PI} x n {GRID_N} x 4 processes, cells per "
        f"setting {args.grid_cells} ({lopsided} at pi=0.9, n=150, {args.grid_acceptance_cells} at pi=0.5, n=1319), "
        f"{s.resamples} resamples, test split resampled by {s.ci_resampling}, seed {args.seed + 4}; truth = the "
        "fitted filter on the exact law; shares in % (MC se)"
    )
    start = time.perf_counter()
    rows = h5_grid(cells, replace(s, min_discordant_minority=0), args.seed + 4)
    if args.grid_out:
        import pandas as pd

        pd.DataFrame(rows).to_csv(args.grid_out, index=False)
    registered = s.min_discordant_minority
    for threshold in sorted({*THRESHOLDS, registered or 0}):
        label = " (registered)" if threshold == registered else ""
        print(f" flagged below {threshold} discordant minority-label test problems{label}:")
        print("\n".join(grid_table(rows, threshold)))
    print(f"  {time.perf_counter() - start:.1f} s")


def _pct(x: dict) -> str:
    return "-" if x["rate"] is None else f"{100 * x['rate']:.1f} ({100 * x['se']:.1f})"


def _write_json(path, payload: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1, default=float) + "\n")


def grid_section(s: Settings, cells: dict, seed: int, h5: bool, out, header: dict, processes=None) -> dict:
    """The grid, one n at a time: the JSON is rewritten after each (``done`` lists the n's finished),
    so a run cut short keeps what it finished; the table is printed at the end."""
    start = time.perf_counter()
    settings = [st for st in grid.grid_settings() if processes is None or st.process in processes]
    print(
        f"Calibration grid: cells per setting by n {cells}, processes {', '.join(sorted({st.process for st in settings}))} at accuracy "
        f"{grid.GRID_ACCURACY} (null and signal), H4 panels of 4 cells; {s.resamples} resamples, level {s.level}, "
        f"seed {seed}; shares in % (MC se); unflagged = an estimate with no flag",
        flush=True,
    )
    rows, done = [], []
    for n, count in cells.items():
        rows += grid.run_grid(settings, {n: count}, grid.grid_for_coverage(s), seed, h5)
        done.append(n)
        elapsed = time.perf_counter() - start
        print(f"  n = {n} done, {elapsed:.1f} s", flush=True)
        payload = {
            **header,
            "part": "grid",
            "seed": seed,
            "cells_per_setting": {str(n): c for n, c in cells.items()},
            "done": done,
            "h5": h5,
            "processes": sorted({st.process for st in settings}),
            "seconds": round(elapsed, 1),
            "truths": {st.key: st.truth for st in settings},
            "pooled_unflagged_coverage": grid.pooled(rows),
            "settings": grid.summarize(rows),
        }
        if out:
            _write_json(out, payload)
    print(f"  {'hyp':3s} {'process':9s} {'setting':12s} {'n':>5s}  {'cells':>5s}  {'not est.':>10s}  "
          f"{'flagged':>10s}  {'unflagged cov.':>14s} [k]  {'estimable cov.':>14s}")  # fmt: skip
    for r in payload["settings"]:
        setting = r["signal"] if r["accuracy"] is None else f"{r['accuracy']:g} {r['signal']}"
        print(
            f"  {r['hypothesis']:3s} {r['process']:9s} {setting:12s} {r['n']:>5d}  {r['cells']:>5d}  "
            f"{_pct(r['not_estimable']):>10s}  {_pct(r['flagged']):>10s}  {_pct(r['unflagged_coverage']):>14s} "
            f"[{r['unflagged_coverage']['of']}]  {_pct(r['estimable_coverage']):>14s}"
        )
    pool = payload["pooled_unflagged_coverage"]
    print("  pooled unflagged coverage: " + ", ".join(f"{h} {_pct(v)} [{v['of']}]" for h, v in pool.items()))
    return payload


def h3_size_section(
    ns, accuracies, draws: int, seed: int, resamples: int, out, header: dict, tests=None, zero_share: float = 0.5
) -> dict:
    """H3's size under the null with ties for v3's t approximation and v4's permutation test;
    the JSON is rewritten after each setting, so a run cut short keeps what it finished."""
    tests = tests or h3_tests(resamples)
    print(f"H3 size under the null with ties (violations min(Geometric({zero_share:g}) - 1, 5) independent of correct): "
          f"{draws} draws per setting, alternative 'less', seed {seed}; rejection % (MC se)")  # fmt: skip
    payload = {**header, "part": "h3-size", "seed": seed, "draws": draws, "resamples": resamples, "settings": []}
    for accuracy in accuracies:
        for n in ns:
            start = time.perf_counter()
            result = h3_size(n, accuracy, draws, seed, tests, zero_share=zero_share)
            result["seconds"] = round(time.perf_counter() - start, 1)
            payload["settings"].append(result)
            for name, rates in result["tests"].items():
                print(
                    f"  n={n:<4d} accuracy {accuracy:<4g} {name:24s} at 0.05: {_pct(rates['0.05']):>10s}  "
                    f"at 0.0125: {_pct(rates['0.0125']):>10s}  ({result['undefined']} draws without a p-value)"
                )
            print(f"    {result['seconds']:.1f} s", flush=True)
            if out:
                _write_json(out, payload)
    return payload


def add_grid_arguments(parser) -> None:
    parser.add_argument("--v4-cells", default="200", help="grid: cells per setting, one or one per --v4-n")
    parser.add_argument("--v4-n", default="40,150,500,1319", help="grid and h3-size: the n's (comma-separated)")
    parser.add_argument("--v4-processes", default="latent,simulator", help="grid: which processes")
    parser.add_argument("--v4-no-h5", action="store_true", help="grid: leave out H5 (most of its time)")
    parser.add_argument("--size-draws", type=int, default=10000, help="h3-size: null cells per setting")
    parser.add_argument("--size-accuracy", default="0.1,0.5,0.9", help="h3-size: P(correct) (comma-separated)")
    parser.add_argument("--size-zero-share", type=float, default=0.5, help="h3-size: P(violations = 0)")
    parser.add_argument("--size-tests", default="t,permutation", help="h3-size: which of the two tests to run")
    parser.add_argument("--v4-out", type=Path, help="grid / h3-size: write the figures here (JSON)")


def run_grid_parts(parts: set, args, plan: dict) -> None:
    """The grid (seed + 5) and the size study (seed + 6), as the script's ``--only`` names them."""
    header = {"command": "python " + " ".join(sys.argv), "plan_version": plan["plan_version"]}
    if parts & {"grid", "h3-size"}:
        print(f"command: {header['command']}", flush=True)
    ns = [int(x) for x in args.v4_n.split(",")]
    s = Settings.from_plan(plan)
    if args.v4_out and {"grid", "h3-size"} <= parts:
        raise SystemExit("--v4-out holds one part's figures: run --only grid and --only h3-size apart")
    if "grid" in parts:
        counts = [int(x) for x in args.v4_cells.split(",")]
        cells = dict(zip(ns, counts * len(ns) if len(counts) == 1 else counts, strict=True))
        processes = args.v4_processes.split(",")
        grid_section(s, cells, args.seed + 5, not args.v4_no_h5, args.v4_out, header, processes)
    if "h3-size" in parts:
        accuracies = [float(x) for x in args.size_accuracy.split(",")]
        resamples = s.spearman_tests["H3"].get("resamples", 9999)
        tests = h3_tests(resamples, args.size_tests.split(","))
        h3_size_section(
            ns, accuracies, args.size_draws, args.seed + 6, resamples, args.v4_out, header, tests, args.size_zero_share
        )


if __name__ == "__main__":
    main()
