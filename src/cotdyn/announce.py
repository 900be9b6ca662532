"""What a run is about to do, printed before its first job (docs/design.md section 8: progress and cost)."""

from __future__ import annotations

from .config import Cell

# problems in a benchmark read whole (no n or limit in its entry)
FULL_SIZES = {"gsm8k": 1319, "math500": 500}


def problem_count(benchmark: dict) -> int | None:
    """How many problems a benchmark entry yields, or None where only its file says."""
    return benchmark.get("n") or benchmark.get("limit") or FULL_SIZES.get(benchmark["kind"])


def run_summary(study: str, cells: dict[str, Cell], protocol: dict, cache: str) -> list[str]:
    """Lines saying what the run generates, where, and with what, before any job starts."""
    lines = [f"cotdyn: study '{study}', outputs under results/{study}/, generations cached in {cache}/"]
    for cell in cells.values():
        model = cell.model
        source = model.get("id") or (model.get("gguf") or {}).get("file", "?")
        n = problem_count(cell.benchmark)
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
