"""Calibration grid over H1-H5 and H3's size under the null with ties (issue 49 item 3;
docs/reference.md section 5, "Calibration grid (plan v4)"). Driven by scripts/calibrate_analysis.py
(``--only grid``).

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
from cotdyn.analysis.calibration_latent import LatentLaw, gap_pp_of, grade_correlation, latent_population
from cotdyn.analysis.calibration_size import share
from cotdyn.analysis.hypotheses.cells import h1_shape_contrast, h2_magnitude_null, h3_graded_signal
from cotdyn.analysis.hypotheses.h5 import h5_triage_filter
from cotdyn.analysis.hypotheses.inputs import CellData, Settings
from cotdyn.analysis.hypotheses.verdicts import h4_distilled_contrast

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


def pooled(rows: list[dict]) -> dict:
    """Unflagged coverage per hypothesis pooled over the grid (each cell one trial)."""
    frame = pd.DataFrame(rows)
    out = {}
    for h, g in frame.groupby("hypothesis"):
        unflagged = g[g["status"] == "unflagged"]
        out[h] = share(int(unflagged["covered"].sum()), len(unflagged))
    return out


def grid_for_coverage(s: Settings) -> Settings:
    """The plan's settings with H3's p-value by the t approximation: the grid reads intervals, which
    no p-value enters, and v4's 9,999-permutation test would be most of its time."""
    return replace(s, spearman_tests={h: {"kind": "t_approximation"} for h in s.spearman_tests})
