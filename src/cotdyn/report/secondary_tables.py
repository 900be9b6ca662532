"""Seed 003's further analyses as report tables (docs/reference.md section 6; ``cotdyn.analysis.secondary``
and ``cotdyn.analysis.secondary_generations``).

``secondary_tables`` builds one variant's tables from its records and its hypotheses.json;
``generation_tables`` builds the tables that compare variants (the seed variants, the budget
probes). Both are pure; ``write_secondary`` and ``write_generations`` write them through
``cotdyn.files.writers``, so the same records and plan give byte-identical files. The values they need
are the plan's (``analysis.secondary``, ``analysis.bootstrap``, ``holm.alpha``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd

from cotdyn.analysis import secondary as sec
from cotdyn.analysis import secondary_generations as gen
from cotdyn.analysis.exploratory import analyzed
from cotdyn.analysis.hypotheses.inputs import panel_cells, plan_key
from cotdyn.files.writers import write_csv, write_text
from cotdyn.report.exploratory_tables import tables_html
from cotdyn.stats import cell_resamples

TABLES = (
    "selective_accuracy",
    "early_exit_recovery",
    "length_confound",
    "endpoint_by_truncation",
    "descriptive_family",
)
GENERATION_TABLES = ("generation_agreement", "seed_spread", "budget_probe")
TABLES_HTML = "tables.html"


@dataclass(frozen=True)
class SecondarySettings:
    """The plan's values for these analyses (plan.yaml ``analysis.secondary``) and its bootstrap."""

    coverage: float
    transitions: tuple[int, ...]
    family: tuple[dict, ...]
    family_cells: tuple[str, ...]
    alpha: float
    seed: int
    resamples: int
    level: float
    # the registered analysis' small-group rule and kept-fraction flag (None where the plan has none)
    min_group_size: int | None = None
    precise_group_size: int | None = None
    min_kept_fraction: float | None = None

    @classmethod
    def from_plan(cls, plan: dict) -> "SecondarySettings":
        where = "analysis.secondary"
        sec_plan = plan_key(plan, "analysis", "secondary")
        boot = plan_key(plan, "analysis", "bootstrap")
        family = plan_key(sec_plan, "descriptive_family", where=where)
        cells = plan_key(family, "cells", where=f"{where}.descriptive_family")
        return cls(
            coverage=float(plan_key(sec_plan, "selective_coverage", where=where)),
            transitions=tuple(int(k) for k in plan_key(sec_plan, "early_exit_transitions", where=where)),
            family=tuple(dict(t) for t in plan_key(family, "tests", where=f"{where}.descriptive_family")),
            family_cells=tuple(panel_cells(plan) if cells == "panel" else cells),
            alpha=float(plan_key(plan, "holm", "alpha")),
            seed=int(plan_key(boot, "seed", where="analysis.bootstrap")),
            resamples=int(plan_key(boot, "resamples", where="analysis.bootstrap")),
            level=float(plan_key(boot, "level", where="analysis.bootstrap")),
            min_group_size=_optional(plan["analysis"].get("groups"), "min_group_size", int),
            precise_group_size=_optional(plan["analysis"].get("groups"), "precise_group_size", int),
            min_kept_fraction=_optional(boot, "min_kept_fraction", float),
        )

    @property
    def groups(self) -> "SecondarySettings | None":
        """What ``secondary.judged`` reads, or None when the plan registers no small-group rule."""
        return self if self.min_group_size is not None else None


def _optional(mapping, key: str, kind):
    return kind(mapping[key]) if isinstance(mapping, dict) and mapping.get(key) is not None else None


def has_secondary(plan: dict) -> bool:
    """Whether the plan pre-specifies these analyses (plan version 1 does not)."""
    return isinstance(plan.get("analysis"), dict) and "secondary" in plan["analysis"]


def _by_cell(records: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    return [(str(c), g.reset_index(drop=True)) for c, g in records.groupby(records["cell"].astype(str), sort=True)]


def _frame(rows: list[dict], columns: tuple[str, ...]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for column in columns:
        if column not in frame.columns:
            frame[column] = None
    return frame


def secondary_tables(records: pd.DataFrame, result: Mapping, *, epsilon: float, s: SecondarySettings) -> dict:
    """One variant's tables over all its cells, keyed by table name; ``epsilon`` is the variant's."""
    out: dict[str, list[dict]] = {name: [] for name in TABLES}
    for cell, rows in _by_cell(records):
        n = len(analyzed(rows))
        # The cell's one resample matrix, the one its registered analysis reads (common random numbers).
        idx = cell_resamples(s.seed, cell, n, s.resamples) if n else None
        out["selective_accuracy"] += [
            {"cell": cell} | r for r in sec.selective_accuracy(rows, s.coverage, idx, s.level, s.groups)
        ]
        out["early_exit_recovery"] += [
            {"cell": cell} | r for r in sec.early_exit_recovery(rows, epsilon, s.transitions, idx, s.level, s.groups)
        ]
        out["length_confound"] += [{"cell": cell} | r for r in sec.length_confound(rows, idx, s.level, s.groups)]
        if "endpoint_answered" in rows.columns:
            out["endpoint_by_truncation"] += [
                {"cell": cell} | r for r in sec.endpoint_by_truncation(rows, idx, s.level, s.groups)
            ]
        else:
            out["endpoint_by_truncation"].append({"cell": cell, "reason": "records have no endpoint_answered column"})
    # the descriptive family over the cells that ran: the plan's family cells first, then the study's
    # others (a cell that never ran is no test; it is not entered as p = 1)
    ran = [cell for cell, _ in _by_cell(records)]
    family_cells = [c for c in s.family_cells if c in ran] + [c for c in ran if c not in s.family_cells]
    out["descriptive_family"] = sec.descriptive_family(result, s.family, family_cells, s.alpha)
    return {name: _frame(rows, ("reason",) if name != "descriptive_family" else ()) for name, rows in out.items()}


def write_secondary(
    records: pd.DataFrame, result: Mapping, out_dir: str | Path, *, epsilon: float, s: SecondarySettings
) -> list[Path]:
    """``<table>.csv`` for every name in TABLES, then all of them in TABLES_HTML."""
    out = Path(out_dir)
    tables = secondary_tables(records, result, epsilon=epsilon, s=s)
    paths = [write_csv(tables[name], out / f"{name}.csv") for name in TABLES]
    title = "Seed 003's further analyses (outside the confirmatory verdicts)"
    return paths + [write_text(tables_html(tables, title), out / TABLES_HTML)]


def variants_differing_only_in(protocols: Mapping[str, dict], registered: str, key: str) -> list[str]:
    """The variants whose protocol equals the registered one but for ``key`` (sorted)."""
    base = protocols[registered]
    return sorted(
        v
        for v, p in protocols.items()
        if v != registered
        and p.get(key) != base.get(key)
        and {k: x for k, x in p.items() if k != key} == {k: x for k, x in base.items() if k != key}
    )


def generation_tables(
    records: Mapping[str, Mapping[str, pd.DataFrame]],
    results: Mapping[str, Mapping],
    protocols: Mapping[str, dict],
    s: SecondarySettings,
    registered: str = "registered",
    benchmarks: Mapping[str, str] | None = None,
) -> dict:
    """The tables across generations: per-problem agreement of every pair of generations that
    differ only in their seed (the registered one included), the spread of each registered
    statistic over them, and, from every variant that differs only in a larger reference budget,
    the completion fraction at the registered budget and the longest uncensored chain.
    ``benchmarks`` maps each cell to its answer rule: predictions agree under the registered
    variant's equivalence for it (without it, as strings)."""
    seeds = [registered, *variants_differing_only_in(protocols, registered, "seed")]
    budget = int(protocols[registered]["reference_max_tokens"])
    probes = [
        v
        for v in variants_differing_only_in(protocols, registered, "reference_max_tokens")
        if int(protocols[v]["reference_max_tokens"]) > budget
    ]
    cells = sorted({c for v in records for c in records[v]})
    agreement, probe_rows = [], []
    for cell in cells:
        for i, a in enumerate(seeds):
            for b in seeds[i + 1 :]:
                if cell not in records.get(a, {}) or cell not in records.get(b, {}):
                    continue
                n = gen.joint_problems(records[a][cell], records[b][cell])
                idx = cell_resamples(s.seed, cell, n, s.resamples) if n else None
                agreement += [
                    {"cell": cell, "variant_a": a, "variant_b": b} | r
                    for r in gen.generation_agreement(
                        records[a][cell],
                        records[b][cell],
                        idx,
                        s.level,
                        s.groups,
                        (benchmarks or {}).get(cell),
                        protocols[registered]["equivalence"],
                        protocols[registered].get("answer_form", "as_written"),
                    )  # fmt: skip
                ]
        for v in probes:
            frame = records[v].get(cell)
            if frame is None:
                continue
            idx = cell_resamples(s.seed, cell, len(frame), s.resamples) if len(frame) else None
            probe_rows.append(
                {"cell": cell, "variant": v, "probe_budget": int(protocols[v]["reference_max_tokens"])}
                | gen.budget_probe(frame, budget, idx, s.level)
            )
    spread = gen.seed_spread({v: results[v] for v in seeds if v in results}, cells) if len(seeds) > 1 else []
    none = {
        "generation_agreement": "no variant differs from the registered one only in its seed",
        "seed_spread": "no variant differs from the registered one only in its seed",
        "budget_probe": "no variant differs from the registered one only in a larger reference budget",
    }
    tables = {"generation_agreement": agreement, "seed_spread": spread, "budget_probe": probe_rows}
    return {name: pd.DataFrame(rows or [{"reason": none[name]}]) for name, rows in tables.items()}


def write_generations(tables: Mapping[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    paths = [write_csv(tables[name], out / f"{name}.csv") for name in GENERATION_TABLES]
    title = "Seed 003's analyses across generations (seeds, budget probes)"
    return paths + [write_text(tables_html(tables, title), out / TABLES_HTML)]


def derive_secondary(records_paths, hypotheses_path, plan: dict, epsilon: float, out_dir) -> list[Path]:
    """analysis/<variant>/secondary/ from the variant's records and hypotheses.json (the rule and the audit)."""
    import json

    records = pd.concat([pd.read_parquet(p) for p in records_paths], ignore_index=True)
    result = json.loads(Path(hypotheses_path).read_text())
    return write_secondary(records, result, out_dir, epsilon=epsilon, s=SecondarySettings.from_plan(plan))


def derive_generations(
    records_paths, hypotheses_paths, protocols: Mapping[str, dict], plan: dict, out_dir, benchmarks=None
) -> list[Path]:
    """analysis/generations/ from every variant's records (paths .../<cell>/<variant>/records.parquet)
    and hypotheses.json (paths .../<variant>/hypotheses.json); ``benchmarks``: cell -> answer rule."""
    import json

    records: dict[str, dict[str, pd.DataFrame]] = {}
    for path in sorted(map(Path, records_paths)):
        records.setdefault(path.parent.name, {})[path.parent.parent.name] = pd.read_parquet(path)
    results = {Path(p).parent.name: json.loads(Path(p).read_text()) for p in hypotheses_paths}
    tables = generation_tables(records, results, protocols, SecondarySettings.from_plan(plan), benchmarks=benchmarks)
    return write_generations(tables, out_dir)
