"""Calibration grid over H1-H5 and H3's size under the null with ties (issue 49 item 3;
docs/reference.md section 5, "Calibration grid (plan v4)"). Driven by scripts/calibrate_analysis.py
(``--only grid`` and ``--only h3-size``).

Two processes draw the cells:

* ``simulator``: the project's own records simulator (``calibration.simulate_labels``), whose laws
  the truths are read off exactly (``feature_population``); it has no coherence, so no H2.
* ``latent``: a process that is not the simulator's: four correlated latent Gaussians (one common
  factor F) cut into levels with heavy ties: violations 0..4 (0 = monotone), coherence on 3 levels,
  final confidence on 5; correct = its latent above a threshold. Given F the four are independent,
  so the exact law of the cut table is a one-dimensional Gauss-Hermite integral (``latent_population``).

Each simulated cell goes through the registered analysis's own functions (cells.h1_shape_contrast,
h2_magnitude_null, h3_graded_signal, h5.h5_triage_filter, verdicts.h4_distilled_contrast) under the
plan's settings. An interval is *unflagged* when it has an estimate, no flag and is not marked
untrusted (``ci_trusted``); coverage is read over the unflagged intervals and over all estimable ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from cotdyn import stats
from cotdyn.analysis.calibration import (
    PlantedCell,
    feature_population,
    h5_planted_reduction_pp,
    population_baseline,
    simulate_labels,
)
from cotdyn.analysis.calibration_latent import (  # noqa: F401  (the script and tests read them here)
    COHERENCE_CUTS,
    COHERENCE_LEVELS,
    VIOLATION_CUTS,
    LatentLaw,
    gap_pp_of,
    grade_correlation,
    latent_population,
)
from cotdyn.analysis.calibration_size import h3_size, h3_tests, null_ties_cell, share  # noqa: F401
from cotdyn.analysis.hypotheses.cells import h1_shape_contrast, h2_magnitude_null, h3_graded_signal
from cotdyn.analysis.hypotheses.h5 import h5_triage_filter
from cotdyn.analysis.hypotheses.inputs import CellData, Settings
from cotdyn.analysis.hypotheses.verdicts import h4_distilled_contrast

HYPOTHESES = ("H1", "H2", "H3", "H4", "H5")

# --- the grid's settings ------------------------------------------------------------------------


@dataclass
class Setting:
    """One cell law of the grid, its exact truths, and how to draw a cell from it."""

    process: str
    accuracy: float
    signal: str
    population: pd.DataFrame
    planted: PlantedCell | None = None  # the simulator's draws come from simulate_labels
    truth: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        p = self.population
        self.truth = {
            "H1": self.planted.gap_pp if self.planted else gap_pp_of(p),
            "H2": grade_correlation(p, "coherence") if "coherence" in p else None,
            "H3": grade_correlation(p, "violations"),
        }

    @property
    def key(self) -> str:
        return f"{self.process} acc={self.accuracy:g} {self.signal}"

    def draw(self, n: int, rng: np.random.Generator) -> CellData:
        if self.planted is not None:
            labels = simulate_labels(replace(self.planted, n=n), rng)
            v, correct, conf = labels.violations.astype(float), labels.correct, labels.final_confidence
            coherence = np.full(n, np.nan)
        else:
            mass = self.population["mass"].to_numpy()
            rows = self.population.iloc[rng.choice(len(mass), size=n, p=mass / mass.sum())]
            v, correct = rows["violations"].to_numpy(dtype=float), rows["correct"].to_numpy(dtype=bool)
            conf, coherence = rows["final_confidence"].to_numpy(dtype=float), rows["coherence"].to_numpy(dtype=float)
        return CellData(
            self.key, n, 0, v == 0, correct, v, coherence, np.column_stack([v, conf]), np.full(n, 5.0), None, None
        )


GRID_ACCURACY = (0.1, 0.5, 0.9)
GRID_N = (40, 150, 500, 1319)


def grid_settings() -> list[Setting]:
    """Both processes at accuracy 0.1, 0.5, 0.9, each under its null and with a signal (the
    simulator: a +10 pp gap at coverage 0.5 with its default violation and confidence laws)."""
    out = []
    for acc in GRID_ACCURACY:
        for signal, law in (("null", LatentLaw(acc)), ("signal", LatentLaw.signal(acc))):
            out.append(Setting("latent", acc, signal, latent_population(law)))
        for signal, planted in (
            ("null", PlantedCell.null(100, 0.5, acc)),
            ("signal", PlantedCell.from_summary(100, 0.5, acc, 10.0)),
        ):
            out.append(Setting("simulator", acc, signal, feature_population(planted), planted=planted))
    return out


# H4's panel at each (process, n): a distilled cell beside three standard ones, drawn independently
# from these settings (cells of the grid itself, so H4 costs no further draws).
H4_DISTILLED = (0.5, "null")
H4_STANDARD = ((0.1, "signal"), (0.5, "signal"), (0.9, "signal"))


# --- one cell through the registered functions --------------------------------------------------


def classify(block: dict, estimate_key: str, ci_key: str, truth: float | None) -> dict:
    """not_estimable / flagged / unflagged, and whether the interval covers ``truth``."""
    est, ci = block.get(estimate_key), block.get(ci_key) or [None, None]
    if truth is None or est is None or ci[0] is None or block.get("estimable") is False:
        return {"status": "not_estimable"}
    # a closed interval; the tolerance absorbs the truths' rounding (a null's exact 0 computes as ~1e-15)
    covered = bool(ci[0] - 1e-9 <= truth <= ci[1] + 1e-9)
    flagged = bool(block.get("flags")) or block.get("ci_trusted") is False
    return {"status": "flagged" if flagged else "unflagged", "covered": covered, "width": ci[1] - ci[0]}


def analyze_grid_cell(
    setting: Setting, d: CellData, s: Settings, seed: int, h5: bool
) -> tuple[dict, tuple[dict, np.ndarray | None]]:
    """H1-H3 (and H5) of one simulated cell; returns the outcomes and H1's block with its gap
    resamples (for H4)."""
    # One matrix serves every statistic of the cell, as stats.cell_resamples does in the analysis;
    # its seed is the cell's own, so the cells an H4 panel combines are independent.
    idx = stats.resample_indices(d.n, s.resamples, seed)
    h1, gap_rows = h1_shape_contrast(d, idx, s)
    out = {
        "H1": classify(h1, "gap_pp", "ci", setting.truth["H1"]),
        "H3": classify(h3_graded_signal(d, idx, s), "rho", "ci", setting.truth["H3"]),
    }
    if setting.truth["H2"] is not None:
        out["H2"] = classify(h2_magnitude_null(d, idx, s), "rho", "ci", setting.truth["H2"])
    if h5:
        block = h5_triage_filter(d, replace(s, seed=seed), idx)
        truth = None
        if block["ci"][0] is not None:
            coverage, acc_monotone = population_baseline(setting.population)
            m = block["model"]
            truth = h5_planted_reduction_pp(
                setting.population, m["coefficients"], m["intercept"], coverage, acc_monotone
            )
        out["H5"] = classify(block, "reduction_pp", "ci", truth)
    return out, (h1, gap_rows)


def run_grid(settings: list[Setting], cells: dict, s: Settings, seed: int, h5: bool = True) -> list[dict]:
    """Every cell's outcome as rows (process, accuracy, signal, n, i, hypothesis, status, covered, width);
    ``cells`` maps n to the cells drawn per setting. Cell i of a setting keeps its seed whatever the
    counts, so a longer run extends a shorter one."""
    rows = []
    by_key = {(st.process, st.accuracy, st.signal): st for st in settings}
    for n, count in cells.items():
        for i in range(count):
            h1_blocks = {}
            for st in settings:
                cell_seed = stats.derive_seed(seed, "grid", st.key, str(n), str(i))
                d = st.draw(n, np.random.default_rng(cell_seed))
                out, h1_blocks[(st.process, st.accuracy, st.signal)] = analyze_grid_cell(st, d, s, cell_seed, h5)
                base = {"process": st.process, "accuracy": st.accuracy, "signal": st.signal, "n": n, "i": i}
                rows += [{**base, "hypothesis": h, **o} for h, o in out.items()]
            for process in sorted({st.process for st in settings}):
                members = [(process, *H4_DISTILLED), *((process, *k) for k in H4_STANDARD)]
                if all(m in h1_blocks for m in members):
                    truth = by_key[members[0]].truth["H1"] - np.mean([by_key[m].truth["H1"] for m in members[1:]])
                    block = h4_panel([h1_blocks[m] for m in members], s)
                    base = {"process": process, "accuracy": None, "signal": "H4 panel", "n": n, "i": i}
                    rows.append(
                        {**base, "hypothesis": "H4", **classify(block, "difference_pp", "difference_ci", truth)}
                    )
    return rows


def h4_panel(h1_blocks: list[tuple[dict, np.ndarray | None]], s: Settings) -> dict:
    """H4 through verdicts.h4_distilled_contrast on a panel of one distilled and three standard cells."""
    names = ["distilled-b", "s1-b", "s2-b", "s3-b"]
    cells = {c: {"summary": {"status": "ok"}, "H1": b} for c, (b, _) in zip(names, h1_blocks)}
    rows = {c: r for c, (_, r) in zip(names, h1_blocks)}
    panel = {"distilled": "distilled", "standard": ["s1", "s2", "s3"]}
    return h4_distilled_contrast("b", cells, rows, panel, s.min_group_size or 0, s)


# --- summaries ----------------------------------------------------------------------------------


def summarize(rows: list[dict]) -> list[dict]:
    """Per hypothesis and setting: cells, shares not estimable and flagged, coverage of the
    unflagged intervals and of all estimable ones, each with its MC se."""
    frame = pd.DataFrame(rows)
    out = []
    keys = ["hypothesis", "process", "signal", "accuracy", "n"]
    for key, g in frame.groupby(keys, sort=True, dropna=False):
        est = g[g["status"] != "not_estimable"]
        unflagged = g[g["status"] == "unflagged"]
        out.append(
            {
                **dict(zip(keys, key)),
                "accuracy": None if pd.isna(key[3]) else float(key[3]),  # H4's panels mix accuracies
                "n": int(key[4]),
                "cells": len(g),
                "not_estimable": share(len(g) - len(est), len(g)),
                "flagged": share(int((g["status"] == "flagged").sum()), len(g)),
                "unflagged_coverage": share(int(unflagged["covered"].sum()), len(unflagged)),
                "estimable_coverage": share(int(est["covered"].sum()), len(est)),
                "mean_width": float(unflagged["width"].mean()) if len(unflagged) else None,
            }
        )
    return out


def band_reading(x: dict, low: float = 0.93, high: float = 0.97) -> str:
    """Where a coverage share lies against the band [low, high] given its MC se: ``under`` or
    ``over`` when rate +- 2 se lies wholly outside it, ``within`` otherwise (``none``: no interval)."""
    if x["rate"] is None:
        return "none"
    if x["rate"] + 2 * x["se"] < low:
        return "under"
    return "over" if x["rate"] - 2 * x["se"] > high else "within"


def pooled(rows: list[dict]) -> dict:
    """Unflagged coverage per hypothesis pooled over the grid (each cell one trial)."""
    frame = pd.DataFrame(rows)
    out = {}
    for h, g in frame.groupby("hypothesis"):
        unflagged = g[g["status"] == "unflagged"]
        out[h] = share(int(unflagged["covered"].sum()), len(unflagged))
    return out


# --- the script's sections (scripts/calibrate_analysis.py --only grid,h3-size) --------------------


def _pct(x: dict) -> str:
    return "-" if x["rate"] is None else f"{100 * x['rate']:.1f} ({100 * x['se']:.1f})"


def _write_json(path, payload: dict) -> None:
    import json
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1, default=float) + "\n")


def grid_for_coverage(s: Settings) -> Settings:
    """The plan's settings with H3's p-value by the t approximation: the grid reads intervals, which
    no p-value enters, and v4's 9,999-permutation test would be most of its time."""
    return replace(s, spearman_tests={h: {"kind": "t_approximation"} for h in s.spearman_tests})


def grid_section(s: Settings, cells: dict, seed: int, h5: bool, out, header: dict, processes=None) -> dict:
    """The grid, one n at a time: the JSON is rewritten after each (``done`` lists the n's finished),
    so a run cut short keeps what it finished; the table is printed at the end."""
    import time

    start = time.perf_counter()
    settings = [st for st in grid_settings() if processes is None or st.process in processes]
    print(
        f"Calibration grid: cells per setting by n {cells}, processes {', '.join(sorted({st.process for st in settings}))} at accuracy "
        f"{GRID_ACCURACY} (null and signal), H4 panels of 4 cells; {s.resamples} resamples, level {s.level}, "
        f"seed {seed}; shares in % (MC se); unflagged = an estimate with no flag",
        flush=True,
    )
    rows, done = [], []
    for n, count in cells.items():
        rows += run_grid(settings, {n: count}, grid_for_coverage(s), seed, h5)
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
            "pooled_unflagged_coverage": pooled(rows),
            "settings": summarize(rows),
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
    import time

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


def add_arguments(parser) -> None:
    """scripts/calibrate_analysis.py's options for the grid and the size study."""
    from pathlib import Path

    parser.add_argument("--v4-cells", default="200", help="grid: cells per setting, one or one per --v4-n")
    parser.add_argument("--v4-n", default="40,150,500,1319", help="grid and h3-size: the n's (comma-separated)")
    parser.add_argument("--v4-processes", default="latent,simulator", help="grid: which processes")
    parser.add_argument("--v4-no-h5", action="store_true", help="grid: leave out H5 (most of its time)")
    parser.add_argument("--size-draws", type=int, default=10000, help="h3-size: null cells per setting")
    parser.add_argument("--size-accuracy", default="0.1,0.5,0.9", help="h3-size: P(correct) (comma-separated)")
    parser.add_argument("--size-zero-share", type=float, default=0.5, help="h3-size: P(violations = 0)")
    parser.add_argument("--size-tests", default="t,permutation", help="h3-size: which of the two tests to run")
    parser.add_argument("--v4-out", type=Path, help="grid / h3-size: write the figures here (JSON)")


def run_parts(parts: set, args, plan: dict) -> None:
    """The grid (seed + 5) and the size study (seed + 6), as the script's ``--only`` names them."""
    import sys

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
