"""Wall time of the power table (cotdyn.analysis.power; issue 62): every hypothesis of the panel's plan
and of the embedded default's, ``--reps`` simulated studies under the assumed effect and as many under
the null, each through the registered analysis.

    python benchmarks/bench_power.py [--reps 200] [--workers 2] [--only panel|default]

Targets (issue 62): the panel's table in at most 10 minutes on 2 cores, the embedded default's in at
most 1 minute. The assumed effects here are for timing, not a registration: a 10-point gap in every
cell (the issue's example), each cell's coverage, accuracy and exclusion rate as the simulator plants
seed 003 section 4's table (calibration.paper_panel), and the simulator's default violation and
confidence laws. The embedded default's are the same at coverage and accuracy 0.5.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from cotdyn.analysis import power
from cotdyn.analysis.calibration import PlantedCell, paper_panel
from cotdyn.plan.load import load_plan

ROOT = Path(__file__).resolve().parents[1]
PLANS = {
    "panel": ROOT / "preregistration" / "plan.yaml",
    "default": ROOT / "preregistration" / "examples" / "default" / "plan.yaml",
}
LAWS = {
    "gap_pp": 10.0,
    "exclusion_rate": 0.0,
    "violation_rate_correct": PlantedCell.violation_rate_correct,
    "violation_rate_incorrect": PlantedCell.violation_rate_incorrect,
    "confidence_correct": PlantedCell.confidence_correct,
    "confidence_incorrect": PlantedCell.confidence_incorrect,
}


def panel_section() -> dict:
    cells = {}
    for cell, law in paper_panel().items():
        accuracy = law.coverage * law.acc_monotone + (1 - law.coverage) * law.acc_non_monotone
        cells[cell] = {"coverage": law.coverage, "accuracy": round(accuracy, 6), "exclusion_rate": law.exclusion_rate}
    source = "benchmark: 10-point gap; coverage, accuracy, exclusion of seed 003 section 4 (calibration.paper_panel)"
    return {"min_power": 0.8, "default": {**LAWS, "source": source}, "cells": cells}


def default_section() -> dict:
    source = "benchmark: 10-point gap at coverage and accuracy 0.5"
    return {"min_power": 0.8, "default": {**LAWS, "coverage": 0.5, "accuracy": 0.5, "source": source}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", choices=sorted(PLANS))
    args = p.parse_args()
    sections = {"panel": panel_section, "default": default_section}
    for name in [args.only] if args.only else ["default", "panel"]:
        plan = load_plan(PLANS[name])
        effects = power.assumed_effects(plan, sections[name]())
        start = time.perf_counter()
        result = power.power_analysis(plan, effects, args.reps, args.seed, (0, 1), workers=args.workers, progress=True)
        seconds = time.perf_counter() - start
        print("\n".join(power.table_lines(result)))
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"{name}: {args.reps} + {args.reps} simulated studies, {len(result['sizes'])} cells "
            f"{result['sizes']}, {args.workers} workers: {seconds:.1f} s (load average {load})\n",
            flush=True,
        )


if __name__ == "__main__":
    main()
