"""What a run is about to do, printed before its first job (docs/design.md section 8: progress and cost)."""

from __future__ import annotations

from typing import Mapping

from .config import Cell


def problem_count(benchmark: dict, registered_sizes: Mapping[str, int]) -> int | None:
    """How many problems a benchmark entry yields: its n, else its limit, else the plan's size of a
    benchmark read whole (``panel.benchmarks.<kind>.n``); None where only its file says."""
    return benchmark.get("n") or benchmark.get("limit") or registered_sizes.get(benchmark["kind"])


def registered_sizes(plan: dict) -> dict[str, int]:
    """The plan's size of each registered benchmark."""
    return {name: entry["n"] for name, entry in plan.get("panel", {}).get("benchmarks", {}).items() if "n" in entry}


def run_summary(
    study: str, cells: dict[str, Cell], protocol: dict, cache: str, sizes: Mapping[str, int] | None = None
) -> list[str]:
    """Lines saying what the run generates, where, and with what, before any job starts.
    ``sizes``: the plan's benchmark sizes (``registered_sizes``)."""
    lines = [f"cotdyn: study '{study}', outputs under results/{study}/, generations cached in {cache}/"]
    for cell in cells.values():
        model = cell.model
        source = model.get("id") or (model.get("gguf") or {}).get("file", "?")
        n = problem_count(cell.benchmark, sizes or {})
        lines.append(
            f"  cell {cell.name}: {source} ({model['backend']} backend, {model.get('device', 'cpu')}), "
            f"{n if n is not None else 'all'} {cell.benchmark['kind']} problems"
        )
    lines.append(
        f"  generation: one reference chain per problem (at most {protocol['reference_max_tokens']} tokens), "
        f"then m = {protocol['m']} continuations (at most {protocol['continuation_max_tokens']} tokens) "
        "from each of its prefixes; a killed run resumes from the cache"
    )
    return lines
