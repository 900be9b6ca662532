"""Wall time of the registered power tables (cotdyn.analysis.power; issue 62): the panel's plan and
the embedded default's, each at its own registered assumed effects, replicates, seed and scales
(plan v5: 200 simulated studies under the assumed effect and 200 under the null), each study through
the registered analysis.

    python benchmarks/bench_power.py [--reps N] [--workers 2] [--only panel|default]

Targets (issue 62): the panel's table in at most 10 minutes on 2 cores, the embedded default's in at
most 1 minute. At the registered replicates the printed table is the one REGISTERED records
(`cotdyn register`), whose sha256 the last line compares.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from cotdyn.analysis import power
from cotdyn.plan.load import load_plan
from cotdyn.plan.registered import read_registered, sibling_paths

ROOT = Path(__file__).resolve().parents[1]
PLANS = {
    "panel": ROOT / "preregistration" / "plan.yaml",
    "default": ROOT / "preregistration" / "examples" / "default" / "plan.yaml",
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, help="studies per scale (default: the plan's replicates)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--only", choices=sorted(PLANS))
    args = p.parse_args()
    times = {}
    for name in [args.only] if args.only else ["default", "panel"]:
        plan = load_plan(PLANS[name])
        effects = power.assumed_effects(plan)
        settings = effects.registered_table()
        reps = args.reps or settings["reps"]
        start = time.perf_counter()
        result = power.power_analysis(
            plan, effects, reps, settings["seed"], settings["scales"], None, args.workers, True
        )
        times[name] = time.perf_counter() - start
        print("\n".join(power.table_lines(result)))
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        registered = read_registered(sibling_paths(PLANS[name])[0]).get("power_table_sha256")
        same = "the registered table" if power.table_sha256(result) == registered else "not the registered table"
        print(
            f"{name}: {reps} studies at each of {len(result['scales'])} scales, {len(result['sizes'])} cells "
            f"{result['sizes']}, {args.workers} workers: {times[name]:.1f} s (load average {load}); {same}\n",
            flush=True,
        )
    print("; ".join(f"{name} {seconds:.1f} s" for name, seconds in times.items()))


if __name__ == "__main__":
    main()
