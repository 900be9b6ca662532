"""Power of the registered analysis (issue 62; docs/reference.md section 5, "Power analysis").

A study of the registered size is simulated under assumed effects (the plan's ``assumed_effects``
section, or the same mapping given beside the plan) and under the null, and each simulated study
goes through ``analyze``, the registered analysis itself: the same settings, bootstrap, Holm family,
verdict rule and combination over cells as a real study. So the power table reads the plan as the
analysis does, and cannot drift from it.

The cells are drawn by the project's records simulator (``calibration.simulate_panel``) from one
planted law per cell. ``scale`` moves every law between the null (0: no gap, correct and incorrect
problems with the same violation and confidence laws) and the assumed effect (1), and beyond; the
power curve and the minimum detectable effect are read along it. The simulator plants no coherence
law (coherence follows its illustrative trajectories), so H2's null claim is tabulated, not powered;
H4 is an estimation hypothesis with no 'supported' to power.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from cotdyn import stats
from cotdyn.analysis.calibration import PlantedCell, feature_population, simulate_panel
from cotdyn.analysis.calibration_latent import grade_correlation
from cotdyn.analysis.hypotheses.inputs import Settings, plan_key, registered_cells
from cotdyn.analysis.hypotheses.run import analyze
from cotdyn.analysis.hypotheses.verdicts import VERDICTS
from cotdyn.plan.config import split_cell

SECTION = "assumed_effects"
# One cell's law: H1's effect (gap_pp) and the nuisance values it assumes, each a PlantedCell field.
EFFECT = "gap_pp"
NUISANCE = (
    "coverage",  # share of monotone chains among usable problems
    "accuracy",  # overall accuracy of usable problems
    "exclusion_rate",
    "violation_rate_correct",  # chance that each further transition of a non-monotone chain is a violation
    "violation_rate_incorrect",
    "confidence_correct",  # chance that each other final sample agrees with the majority answer
    "confidence_incorrect",
)
LAW_KEYS = (EFFECT, *NUISANCE)
# pairs that are equal under the null: the law at scale 0 sets both to their mean
PAIRS = (("violation_rate_correct", "violation_rate_incorrect"), ("confidence_correct", "confidence_incorrect"))
# criteria with a direction to detect: power is P(supported) under the effect
DIRECTIONAL = ("ci_lower_above", "ci_upper_below")
DEFAULT_SCALES = (0.0, 0.5, 1.0, 1.5)
TABLE_KEYS = ("replicates", "seed", "scales")


class PowerInputError(ValueError):
    """Bad assumed effects or sizes, naming the plan key."""


@dataclass(frozen=True)
class AssumedEffects:
    """The plan's assumed effects: the power required and one full law per registered cell; and
    where the plan registers them (v5 on), the table's replicates, seed and scales."""

    min_power: float
    laws: dict  # cell -> {key: value} over LAW_KEYS
    sources: dict  # cell -> where its values come from
    replicates: int | None = None
    seed: int | None = None
    scales: tuple | None = None

    def registered_table(self) -> dict:
        """The registered table's settings, or a PowerInputError naming the key the plan lacks."""
        missing = [k for k in TABLE_KEYS if getattr(self, k) is None]
        if missing:
            raise PowerInputError(
                f"{SECTION}: missing key(s) {missing} (the registered power table's replicates, seed and scales)"
            )
        return {"reps": self.replicates, "seed": self.seed, "scales": self.scales}


def _number(value, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise PowerInputError(f"{where}: must be a number, got {value!r}")
    if not low <= value <= high:
        raise PowerInputError(f"{where}: {value:g} is outside its range [{low:g}, {high:g}]")
    return float(value)


def _count(value, where: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise PowerInputError(f"{where}: must be an integer >= {low}, got {value!r}")
    return int(value)


def _table_settings(section: dict) -> dict:
    out = {}
    if "replicates" in section:
        out["replicates"] = _count(section["replicates"], f"{SECTION}.replicates", 1)
    if "seed" in section:
        out["seed"] = _count(section["seed"], f"{SECTION}.seed", 0)
    if "scales" in section:
        scales = section["scales"]
        if not isinstance(scales, list) or not scales:
            raise PowerInputError(f"{SECTION}.scales: must be a list of numbers >= 0, got {scales!r}")
        out["scales"] = tuple(_number(s, f"{SECTION}.scales", 0.0, 100.0) for s in scales)
    return out


def _law_entries(entry, where: str) -> tuple[dict, str | None]:
    if not isinstance(entry, dict):
        raise PowerInputError(f"{where}: must be a mapping of {', '.join(LAW_KEYS)} and source")
    unknown = sorted(set(entry) - {*LAW_KEYS, "source"})
    if unknown:
        raise PowerInputError(f"{where}: unknown key(s) {unknown} (known: {', '.join(LAW_KEYS)}, source)")
    law = {}
    for key in LAW_KEYS:
        if key in entry:
            low, high = (-100.0, 100.0) if key == EFFECT else (0.0, 1.0)
            law[key] = _number(entry[key], f"{where}.{key}", low, high)
    source = entry.get("source")
    if source is not None and (not isinstance(source, str) or not source.strip()):
        raise PowerInputError(f"{where}.source: must be a non-empty text, got {source!r}")
    return law, source


def assumed_effects(plan: dict, section: dict | None = None) -> AssumedEffects:
    """The assumed effects of ``plan`` (its ``assumed_effects`` section, or ``section`` given beside a
    plan that registers none), every cell's law complete, in range and possible; else a
    PowerInputError naming the key."""
    section = plan.get(SECTION) if section is None else section
    if section is None:
        raise PowerInputError(
            f"plan: no '{SECTION}' section (plans v1-v4 register none): give the assumed effects beside the plan"
        )
    if not isinstance(section, dict):
        raise PowerInputError(f"{SECTION}: must be a mapping, got {type(section).__name__}")
    known = ("min_power", *TABLE_KEYS, "default", "cells")
    unknown = sorted(set(section) - set(known))
    if unknown:
        raise PowerInputError(f"{SECTION}: unknown key(s) {unknown} (known: {', '.join(known)})")
    if "min_power" not in section:
        raise PowerInputError(f"{SECTION}: missing key 'min_power' (the power the plan requires, e.g. 0.8)")
    min_power = _number(section["min_power"], f"{SECTION}.min_power", 0.0, 1.0)
    table = _table_settings(section)
    default, default_source = _law_entries(section.get("default", {}), f"{SECTION}.default")
    cells = section.get("cells", {})
    if not isinstance(cells, dict):
        raise PowerInputError(f"{SECTION}.cells: must be a mapping of cell names, got {type(cells).__name__}")
    registered = sorted(registered_cells(plan))
    stray = sorted(set(cells) - set(registered))
    if stray:
        raise PowerInputError(f"{SECTION}.cells: {stray} not a cell of the plan (its cells: {', '.join(registered)})")
    laws, sources = {}, {}
    for cell in registered:
        where = f"{SECTION}.cells.{cell}"
        own, own_source = _law_entries(cells.get(cell, {}), where) if cell in cells else ({}, None)
        law = {**default, **own}
        missing = [k for k in LAW_KEYS if k not in law]
        if missing:
            raise PowerInputError(f"{where}: missing value(s) {missing} (in neither {SECTION}.default nor {where})")
        source = own_source or default_source
        if source is None:
            raise PowerInputError(
                f"{where}: missing key 'source' (where its values come from; or {SECTION}.default.source)"
            )
        planted(law, 1, 1.0, where)  # an impossible accuracy is refused here, not mid-simulation
        laws[cell], sources[cell] = law, source
    return AssumedEffects(min_power, laws, sources, **table)


def planted(law: dict, n: int, scale: float, where: str = SECTION) -> PlantedCell:
    """The cell law at ``scale`` times the assumed effect: the gap scaled, and each correct/incorrect
    pair moved from its mean (the null, scale 0) to its assumed values (scale 1) and on."""
    values = {**law, EFFECT: scale * law[EFFECT]}
    for pair in PAIRS:
        mean = (law[pair[0]] + law[pair[1]]) / 2
        values.update({key: (1 - scale) * mean + scale * law[key] for key in pair})  # exact at 0 and at 1
    impossible = [f"{key} = {values[key]:.4g}" for pair in PAIRS for key in pair if not 0 <= values[key] <= 1]
    try:
        cell = PlantedCell.from_summary(n, **values)
    except ValueError as e:  # the monotone or non-monotone accuracy outside [0, 1]
        impossible.append(str(e).removeprefix("PlantedCell."))
    if impossible:
        raise PowerInputError(
            f"{where}: impossible law at {scale:g} x the assumed effect: {'; '.join(impossible)} (accuracy "
            f"{law['accuracy']:g}, {EFFECT} {values[EFFECT]:g}, coverage {law['coverage']:g})"
        )
    return cell


def registered_sizes(plan: dict, n: int | None = None) -> dict[str, int]:
    """The problems per registered cell: its benchmark's registered ``n`` (or ``n`` for every cell, for
    a plan whose cells are user data of unknown size)."""
    sizes = {}
    benchmarks = plan_key(plan, "panel", "benchmarks")
    for cell in sorted(registered_cells(plan)):
        if n is not None:
            sizes[cell] = n
            continue
        benchmark = split_cell(cell)[1]
        size = benchmarks.get(benchmark, {}).get("n") if isinstance(benchmarks.get(benchmark), dict) else None
        if size is None:
            raise PowerInputError(f"panel.benchmarks.{benchmark}.n: missing (the registered size); give a size")
        sizes[cell] = int(size)
    for cell, size in sizes.items():
        if size < 1:
            raise PowerInputError(f"size of cell {cell}: must be >= 1, got {size}")
    return sizes


def study_verdicts(plan: dict, effects: AssumedEffects, sizes: dict, scale: float, seed: int) -> dict:
    """One simulated study through the registered analysis: each hypothesis's verdict and its cells'."""
    truths = {cell: planted(effects.laws[cell], sizes[cell], scale) for cell in sorted(sizes)}
    result = analyze(simulate_panel(truths, seed), plan, "power analysis: simulated records")
    return {
        hid: {"verdict": v["verdict"], "cells": {c: block["verdict"] for c, block in v["cells"].items()}}
        for hid, v in result["verdicts"].items()
    }


def replicate_seed(seed: int, scale: float, i: int) -> int:
    """Replicate i of a scale: its own stream, so more replicates extend fewer."""
    return stats.derive_seed(seed, "power", f"{scale:g}", str(i))


def _one(task, plan, effects, sizes):
    scale, i, seed = task
    return study_verdicts(plan, effects, sizes, scale, replicate_seed(seed, scale, i))


def _one_blas_thread() -> None:
    # a study's arrays are small: BLAS threads cost more than they give (H5's fit runs 3 times slower)
    threadpool_limits(1)


def share(count: int, total: int) -> dict:
    """A rate with its Monte Carlo standard error."""
    rate = count / total
    return {"rate": rate, "se": math.sqrt(rate * (1 - rate) / total), "count": count, "of": total}


def _tally(runs: list[dict], hid: str) -> dict:
    """The share of each verdict of hypothesis ``hid`` over simulated studies, and of each of its cells'."""

    def shares(verdicts: list[str]) -> dict:
        names = [*VERDICTS, *sorted(set(verdicts) - set(VERDICTS))]  # an estimation hypothesis's verdicts after
        return {v: share(verdicts.count(v), len(verdicts)) for v in names}

    return {
        "verdicts": shares([r[hid]["verdict"] for r in runs]),
        "cells": {cell: shares([r[hid]["cells"][cell] for r in runs]) for cell in runs[0][hid]["cells"]},
    }


def truths_at(effects: AssumedEffects, cell: str, scale: float) -> dict:
    """The planted truths of a cell at ``scale``: H1's gap (pp) and H3's population Spearman rho."""
    cell_law = planted(effects.laws[cell], 1, scale)
    return {"gap_pp": cell_law.gap_pp, "rho_violations": grade_correlation(feature_population(cell_law), "violations")}


def minimum_detectable(curve: list[tuple[float, float]], min_power: float) -> float | None:
    """The smallest scale at which power reaches ``min_power``, linear between simulated scales
    (None: not reached on the curve)."""
    for (s0, p0), (s1, p1) in zip(curve, curve[1:]):
        if p0 >= min_power:
            return s0
        if p1 >= min_power:
            return s0 + (s1 - s0) * (min_power - p0) / (p1 - p0)
    return curve[-1][0] if curve and curve[-1][1] >= min_power else None


def power_analysis(
    plan: dict,
    effects: AssumedEffects,
    reps: int = 200,
    seed: int = 0,
    scales=DEFAULT_SCALES,
    n: int | None = None,
    workers: int = 1,
    progress: bool = False,
) -> dict:
    """The power table: per hypothesis, the probability of each verdict under the null (scale 0) and
    under the assumed effect (scale 1), with Monte Carlo standard errors; the power curve over
    ``scales``; and the minimum detectable effect at the registered size for the plan's min_power."""
    if reps < 1:
        raise PowerInputError(f"reps: must be >= 1, got {reps}")
    Settings.from_plan(plan)  # a plan the analysis cannot read fails here, by its key, not in every study
    scales = sorted({0.0, 1.0, *(float(s) for s in scales)})
    if scales[0] < 0:
        raise PowerInputError(f"scales: must be >= 0, got {scales[0]:g}")
    sizes = registered_sizes(plan, n)
    feasible, infeasible = [], []
    for s in scales:
        try:
            for cell in sizes:
                planted(effects.laws[cell], 1, s, f"{SECTION}.cells.{cell}")
            feasible.append(s)
        except PowerInputError as e:
            if s in (0.0, 1.0):
                raise
            infeasible.append({"scale": s, "reason": str(e)})
    tasks = [(s, i, seed) for s in feasible for i in range(reps)]
    run = partial(_one, plan=plan, effects=effects, sizes=sizes)
    runs = []
    with tqdm(total=len(tasks), desc="power: simulated studies", unit="study", disable=not progress) as bar:
        if workers > 1:
            with ProcessPoolExecutor(workers, initializer=_one_blas_thread) as pool:
                for r in pool.map(run, tasks, chunksize=max(1, len(tasks) // (8 * workers))):
                    runs.append(r)
                    bar.update()
        else:
            with threadpool_limits(1):
                for task in tasks:
                    runs.append(run(task))
                    bar.update()
    by_scale = {s: runs[k * reps : (k + 1) * reps] for k, s in enumerate(feasible)}
    hypotheses = []
    for h in plan_key(plan, "hypotheses"):
        kind = h["criterion"]["kind"]
        powered = kind in DIRECTIONAL
        entry = {
            "id": h["id"],
            "role": h.get("role"),
            "statistic": h["statistic"],
            "criterion": h["criterion"],
            "powered": powered,
            "effect": _tally(by_scale[1.0], h["id"]),
            "null": _tally(by_scale[0.0], h["id"]),
        }
        if powered:
            curve = [(s, _tally(by_scale[s], h["id"])["verdicts"]["supported"]["rate"]) for s in feasible]
            entry["power"] = entry["effect"]["verdicts"]["supported"]
            entry["false_support"] = entry["null"]["verdicts"]["supported"]
            entry["curve"] = [{"scale": s, "power": p} for s, p in curve]
            mde = minimum_detectable(curve, effects.min_power)
            entry["minimum_detectable"] = {
                "scale": mde,
                "truths": {c: truths_at(effects, c, mde) for c in h.get("cells", [])} if mde is not None else None,
            }
            entry["underpowered"] = entry["power"]["rate"] < effects.min_power
        else:
            entry["note"] = (
                "an estimation hypothesis: it never says supported, so it has no power; its verdicts are tabulated"
                if kind == "estimation"
                else "a null claim (CI inside a band): the simulator plants no coherence law, so its verdicts are "
                "tabulated, not powered"
            )
        hypotheses.append(entry)
    return {
        "reps": reps,
        "seed": seed,
        "min_power": effects.min_power,
        "alpha": float(plan_key(plan, "holm", "alpha")),
        "sizes": sizes,
        "scales": feasible,
        "infeasible_scales": infeasible,
        "assumed_effects": {c: {**effects.laws[c], "source": effects.sources[c]} for c in sorted(effects.laws)},
        "truths": {c: truths_at(effects, c, 1.0) for c in sorted(effects.laws)},
        "hypotheses": hypotheses,
    }


def problems_needed(
    plan: dict, effects: AssumedEffects, sizes, reps: int, seed: int, workers: int = 1, progress: bool = False
) -> dict:
    """For a plan whose cells are user data of unknown size (``cotdyn init``): the power at the
    assumed effect with each candidate number of problems per cell, and per powered hypothesis the
    smallest candidate whose power reaches min_power (None: none of them does)."""
    sizes = sorted({int(n) for n in sizes})
    if not sizes or sizes[0] < 1:
        raise PowerInputError(f"problems per cell: give sizes >= 1, got {sizes}")
    by_n = {n: power_analysis(plan, effects, reps, seed, (0, 1), n, workers, progress) for n in sizes}
    out = {}
    for h in by_n[sizes[0]]["hypotheses"]:
        if h["powered"]:
            powers = [(n, next(x for x in by_n[n]["hypotheses"] if x["id"] == h["id"])["power"]) for n in sizes]
            reached = [n for n, p in powers if p["rate"] >= effects.min_power]
            out[h["id"]] = {"power_by_n": [{"n": n, **p} for n, p in powers], "needed": reached[0] if reached else None}
    return out


def _pct(x: dict) -> str:
    return f"{100 * x['rate']:5.1f} ({100 * x['se']:.1f})"


def table_lines(result: dict) -> list[str]:
    """The power table as text: per hypothesis, each verdict's share (%) under the effect and under
    the null, with its MC se, and the minimum detectable effect as a share of the assumed one."""
    lines = [
        f"Power of the registered analysis: {result['reps']} simulated studies per world, seed {result['seed']}, "
        f"min_power {result['min_power']:g}; shares in % (MC se)",
        f"  {'hypothesis':16s} {'world':6s} {'supported':>12s} {'not_supported':>14s} {'not_estimable':>14s}  "
        "min. detectable",
    ]
    for h in result["hypotheses"]:
        for world in ("effect", "null"):
            v = h[world]["verdicts"]
            cols = [(_pct(v[k]) if k in v else "-") for k in VERDICTS]
            extra = ""
            if world == "effect" and h["powered"]:
                scale = h["minimum_detectable"]["scale"]
                extra = "not reached" if scale is None else f"{scale:.2f} x assumed"
                extra += "  UNDERPOWERED" if h["underpowered"] else ""
            elif world == "effect":
                others = {k: s for k, s in v.items() if k not in VERDICTS}
                extra = ", ".join(f"{k} {_pct(s).strip()}" for k, s in others.items()) or "not powered"
            lines.append(f"  {h['id']:16s} {world:6s} {cols[0]:>12s} {cols[1]:>14s} {cols[2]:>14s}  {extra}")
    return lines


def plot_curves(result: dict, path) -> None:
    """Power against the effect (as a multiple of the assumed one), one line per powered hypothesis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for h in result["hypotheses"]:
        if h["powered"]:
            x = [p["scale"] for p in h["curve"]]
            y = [p["power"] for p in h["curve"]]
            se = [math.sqrt(p * (1 - p) / result["reps"]) for p in y]
            ax.errorbar(x, y, yerr=[2 * s for s in se], marker="o", capsize=3, label=h["id"])
    ax.axhline(result["min_power"], color="grey", linestyle="--", label=f"min_power {result['min_power']:g}")
    ax.axhline(result["alpha"], color="grey", linestyle=":", label=f"alpha {result['alpha']:g}")
    ax.set_xlabel("effect, as a multiple of the assumed effect (0 = the null)")
    ax.set_ylabel("P(supported)  (bars: 2 MC se)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def registered_table(plan: dict, workers: int = 1, progress: bool = False) -> dict:
    """The plan's registered power table: its own assumed effects at its registered replicates, seed
    and scales (what ``cotdyn register`` records and the audit recomputes)."""
    effects = assumed_effects(plan)
    settings = effects.registered_table()
    return power_analysis(
        plan, effects, settings["reps"], settings["seed"], settings["scales"], None, workers, progress
    )


# Digits a registered table's floats keep: its rates are counts over replicates, exact; its truths and
# minimum detectable effects are floating-point arithmetic, whose last bits may differ between machines.
TABLE_DIGITS = 9


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.{TABLE_DIGITS}g}")
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def table_bytes(result: dict) -> bytes:
    """The table as registered (power.json beside REGISTERED): sorted JSON, floats to TABLE_DIGITS
    significant digits, so the same table is the same bytes, and the same sha256, on any machine."""
    return (json.dumps(_rounded(result), indent=1, sort_keys=True) + "\n").encode()


def table_sha256(result: dict) -> str:
    return hashlib.sha256(table_bytes(result)).hexdigest()


def _effect_words(result: dict, h: dict) -> str:
    cells = sorted(h["effect"]["cells"])
    if h["statistic"].startswith("accuracy_gap"):
        gaps = sorted({result["truths"][c]["gap_pp"] for c in cells})
        return f"a {gaps[0]:g}-point gap" if len(gaps) == 1 else f"gaps of {gaps[0]:g} to {gaps[-1]:g} points"
    if h["statistic"].startswith("spearman_violations"):
        rhos = sorted({round(result["truths"][c]["rho_violations"], 2) for c in cells})
        return f"rho {rhos[0]:g}" if len(rhos) == 1 else f"rho {rhos[0]:g} to {rhos[-1]:g}"
    return "the assumed effect"


def underpowered(result: dict) -> list[str]:
    """Each powered hypothesis below the plan's min_power, in words: 'H1: power 0.41 (MC se 0.03) for
    a 10-point gap (min_power 0.8)'."""
    return [
        f"{h['id']}: power {h['power']['rate']:.2f} (MC se {h['power']['se']:.2f}) for "
        f"{_effect_words(result, h)} (min_power {result['min_power']:g})"
        for h in result["hypotheses"]
        if h["powered"] and h["underpowered"]
    ]


__all__ = [
    "AssumedEffects", "LAW_KEYS", "PowerInputError", "assumed_effects", "minimum_detectable", "planted",
    "plot_curves", "power_analysis", "registered_sizes", "registered_table", "study_verdicts", "table_bytes",
    "table_lines", "table_sha256", "underpowered",
]  # fmt: skip
