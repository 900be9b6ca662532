"""``cotdyn power``: the plan's power, by simulating studies of its registered size through its own
registered analysis (issue 62; cotdyn.analysis.power; docs/reference.md section 5, "Power analysis").

``cotdyn power --plan P [--effects FILE] [--assume KEY=VALUE ...] [--reps N] [--seed S] [--out DIR]``
prints the power table and writes power.json and power.png (the power curves) into ``--out``. Without
``--effects``, the plan's own ``assumed_effects`` (v5 on), at its registered replicates, seed and scales
unless the command line sets them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cotdyn.files.terminal import printable

DEFAULT_REPS = 200


def _assumed(value: str) -> tuple[str, float]:
    key, sep, number = value.partition("=")
    try:
        return key.strip(), float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--assume {value!r}: not KEY=NUMBER") from None


def _numbers(option: str, value: str, kind=float) -> list:
    from cotdyn.analysis.power import PowerInputError

    try:
        return [kind(x) for x in value.split(",")]
    except ValueError:
        raise PowerInputError(f"{option}: {value!r} is not a comma-separated list of numbers") from None


def effects_section(plan: dict, effects_file: str | None, assume: list[tuple[str, float]]) -> dict | None:
    """The assumed effects: the plan's section, else the file's (its ``assumed_effects`` mapping or the
    whole file), with each ``--assume KEY=VALUE`` set in its ``default`` (``min_power`` at its top)."""
    from cotdyn.analysis.power import LAW_KEYS, SECTION, PowerInputError
    from cotdyn.files.strict import read_yaml

    section = plan.get(SECTION)
    if effects_file is not None:
        loaded = read_yaml(effects_file)
        section = loaded.get(SECTION, loaded) if isinstance(loaded, dict) else loaded
        if not isinstance(section, dict):
            raise PowerInputError(f"{effects_file}: the assumed effects must be a mapping")
    if not assume:
        return section
    section = dict(section or {})
    default = dict(section.get("default") or {})
    default.setdefault("source", "command line (--assume)")
    for key, value in assume:
        if key == "min_power":
            section["min_power"] = value
        elif key in LAW_KEYS:
            default[key] = value
        else:
            raise PowerInputError(f"--assume {key}: unknown key (known: min_power, {', '.join(LAW_KEYS)})")
    return section | {"default": default}


def table_settings(effects, reps: int | None = None, seed: int | None = None, scales=None) -> tuple:
    """The table's replicates, seed and scales: those given, else the plan's (v5 on), else the defaults."""
    from cotdyn.analysis.power import DEFAULT_SCALES

    return (
        reps if reps is not None else effects.replicates or DEFAULT_REPS,
        seed if seed is not None else effects.seed or 0,
        scales or effects.scales or DEFAULT_SCALES,
    )


def cmd_power(args) -> int:
    from cotdyn.analysis import power
    from cotdyn.plan.load import load_plan

    try:
        plan = load_plan(args.plan)
        effects = power.assumed_effects(plan, effects_section(plan, args.effects, args.assume))
        # what the command line does not set, the plan's registered table does (plan v5 on)
        scales = _numbers("--scales", args.scales) if args.scales else None
        reps, seed, scales = table_settings(effects, args.reps, args.seed, scales)
        sizes = _numbers("--needed", args.needed, int) if args.needed else None
        workers = args.workers or os.cpu_count() or 1
        result = power.power_analysis(plan, effects, reps, seed, scales, args.n, workers, progress=True)
        if sizes:
            result["problems_needed"] = power.problems_needed(plan, effects, sizes, reps, seed, workers, True)
    except (ValueError, KeyError) as e:  # PowerInputError, the plan's and the analysis settings' named errors
        print(printable(f"error: {e.args[0] if e.args else e}"), file=sys.stderr)
        return 1
    except OSError as e:
        print(printable(f"error: {e.filename or args.plan}: {e.strerror or e}"), file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "power.json").write_text(json.dumps({"plan": str(args.plan), **result}, indent=1, sort_keys=True) + "\n")
    power.plot_curves(result, out / "power.png")
    print("\n".join(power.table_lines(result)))
    for hid, needed in result.get("problems_needed", {}).items():
        by_n = ", ".join(f"{x['n']}: {100 * x['rate']:.1f}% ({100 * x['se']:.1f})" for x in needed["power_by_n"])
        reached = f"{needed['needed']} problems per cell" if needed["needed"] else "not reached at these sizes"
        print(f"  {hid}: power by problems per cell {by_n}; min_power {result['min_power']:g}: {reached}")
    print(f"wrote {out / 'power.json'} and {out / 'power.png'}")
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "power", help="the plan's power: studies of the registered size simulated through the registered analysis"
    )
    p.add_argument("--plan", required=True, help="the plan (plan.yaml)")
    p.add_argument(
        "--effects",
        help="a YAML file of assumed effects (an assumed_effects mapping), for a plan that registers none",
    )
    p.add_argument(
        "--assume",
        type=_assumed,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one assumed value for every cell (e.g. gap_pp=10, coverage=0.5, min_power=0.9)",
    )
    p.add_argument(
        "--reps", type=int, help="simulated studies per effect size (default: the plan's replicates, else 200)"
    )
    p.add_argument("--seed", type=int, help="the simulation's seed (default: the plan's, else 0)")
    p.add_argument(
        "--scales",
        help="effect sizes of the power curve, as multiples of the assumed effect (default: the plan's scales, "
        "else 0,0.5,1,1.5; 0 and 1 always)",
    )
    p.add_argument("--n", type=int, help="problems per cell, for cells of unknown size (default: the registered n)")
    p.add_argument(
        "--needed",
        metavar="N1,N2,...",
        help="also the power at the assumed effect with each number of problems per cell, and the smallest that "
        "reaches min_power",
    )
    p.add_argument("--workers", type=int, help="processes (default: the CPUs here); the result does not depend on it")
    p.add_argument("--out", default="power", help="folder for power.json and power.png (default: power)")
    p.set_defaults(run=cmd_power)
