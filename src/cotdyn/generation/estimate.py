"""What a run is about to generate and how long that should take (docs/reference.md section 8).

A phase's work is counted exactly: its rows (samples not yet in the cache) and the most tokens
they can draw (every output at its budget). Before any chunk has run, its time is that bound at the
backend's declared rate (``RATES``): an upper bound, the start of a run's summary. Once the phase's
first chunk is generated and cached like every other, the rest of the phase at that chunk's
measured rate (seconds a row): an estimate, printed in the job's log. The study's bound is checked
against its token budget as the workflow is read, before any job.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from cotdyn.generation.backends.registry import device_kind
from cotdyn.plan.config import Cell, reference_id
from cotdyn.protocol.segment import checkpoints

# Tokens a second each backend draws on a device kind, for the time before a phase's first chunk: the
# simulated backend on the development machine's 2 cores (91k-321k by phase, benchmarks/bench_estimate.py,
# 2026-12-07), the transformers backend on the embedded SmolLM2-135M there (70 on continuation-shaped
# requests, 1 thread, batch 16, 2026-12-06), vLLM on a 7B model on one H200 (docs/generation-cost.md).
# A backend not named has none; its first chunk tells its speed.
RATES = {("simulated", "cpu"): 150_000.0, ("transformers", "cpu"): 70.0, ("vllm", "cuda"): 27_400.0}

# The most tokens a study's generation may take at its upper bound unless its config raises it
# (``token_budget``): 100 billion, some six times the largest shipped config's bound (the registered
# panel's sweeps, 17.2 billion, its uncapped variant bounded by every token ending a step). An m or a
# budget mistyped by orders of magnitude (m = 10^9: 16 trillion) stops the run before it starts.
DEFAULT_TOKEN_BUDGET = 100_000_000_000


class BudgetError(ValueError):
    """A study whose generation's upper bound exceeds its token budget."""


def declared_rate(model: dict) -> float | None:
    """The tokens a second ``RATES`` declares for the model entry's backend and device kind."""
    return RATES.get((model.get("backend"), device_kind(model)))


def duration(seconds: float) -> str:
    """A duration as a person says it: 'about 40 s', 'about 3 min', 'about 2.5 h'."""
    if not math.isfinite(seconds) or seconds < 0:
        return "an unknown time"
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"about {round(seconds)} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def at_most(seconds: float) -> str:
    """An upper bound as a person says it: 'at most 3 min', 'under a second'."""
    said = duration(seconds)
    return said if said == "under a second" else f"at most {said.removeprefix('about ')}"


def at_declared_rate(tokens: int, model: dict) -> str:
    """'at most <time> at <backend>'s declared <rate> tokens/s', or why there is no such time."""
    rate = declared_rate(model)
    if rate is None:
        return f"no declared rate for backend {model.get('backend')} on {device_kind(model)}"
    return f"{at_most(tokens / rate)} at its declared {rate:,.0f} tokens/s"


def problem_count(benchmark: dict, registered_sizes: Mapping[str, int]) -> int | None:
    """How many problems a benchmark entry yields: its n, else the plan's size of a benchmark read
    whole (``panel.benchmarks.<kind>.n``), else, for a researcher's JSONL, its non-blank lines; cut
    to its limit (the first ``limit`` problems). None where only the loaded rows can say."""
    size = benchmark.get("n") or registered_sizes.get(benchmark["kind"]) or _jsonl_lines(benchmark)
    limit = benchmark.get("limit")
    return min(size, limit) if size and limit else size or limit


def _jsonl_lines(benchmark: dict) -> int | None:
    if benchmark.get("kind") != "jsonl" or not benchmark.get("path"):
        return None
    try:
        with open(benchmark["path"], encoding="utf-8") as f:
            return sum(1 for line in f if line.strip())
    except (OSError, UnicodeDecodeError):
        return None


def registered_sizes(plan: dict) -> dict[str, int]:
    """The plan's size of each registered benchmark."""
    return {name: entry["n"] for name, entry in plan.get("panel", {}).get("benchmarks", {}).items() if "n" in entry}


def token_bound(phase: str, protocol: dict, problems: int | None) -> int | None:
    """The most tokens a phase can generate: every chain at its budget; for continuations, every
    prefix such a chain can have (token checkpoints: one per stride; step checkpoints: the cap + 1,
    else every token of the chain may end a step) times m continuations at their budget."""
    if problems is None:
        return None
    if phase == "reference":
        return problems * protocol["reference_max_tokens"]
    if protocol["checkpoints"] == "tokens":
        prefixes = len(checkpoints(protocol["reference_max_tokens"], protocol["checkpoint_stride"]))
    elif protocol.get("cap") is not None:
        prefixes = protocol["cap"] + 1
    else:
        prefixes = protocol["reference_max_tokens"] + 1
    return problems * prefixes * protocol["m"] * protocol["continuation_max_tokens"]


def run_summary(
    study: str,
    cells: Mapping[str, Cell],
    protocol: dict,
    cache: str,
    sizes: Mapping[str, int] | None = None,
    jobs: Sequence[tuple[str, str, str, dict, int | None]] | None = None,
    models: Mapping[str, dict] | None = None,
) -> list[str]:
    """Lines saying what the run generates, where and with what, before any job starts, and (given
    ``jobs``: (phase, cell, its reference setting or variant, protocol, threads) each, and ``models``:
    each cell's model entry) each phase's token bound and time at its backend's declared rate."""
    sizes = sizes or {}
    lines = [f"cotdyn: study '{study}', outputs under results/{study}/, generations cached in {cache}/"]
    for cell in cells.values():
        model = cell.model
        source = model.get("id") or (model.get("gguf") or {}).get("file", "?")
        n = problem_count(cell.benchmark, sizes)
        lines.append(
            f"  cell {cell.name}: {source} ({model['backend']} backend, {model.get('device', 'cpu')}), "
            f"{n if n is not None else 'all'} {cell.benchmark['kind']} problems"
        )
    lines.append(
        f"  generation: one reference chain per problem (at most {protocol['reference_max_tokens']} tokens), "
        f"then m = {protocol['m']} continuations (at most {protocol['continuation_max_tokens']} tokens) "
        "from each of its prefixes; a killed run resumes from the cache"
    )
    if jobs is None or models is None:
        return lines
    if not jobs:
        return [*lines, "  time: no generation in this run (its chains and samples are written already)"]
    lines.append(
        "  time (generation only; requests already in the cache take none; each phase's first chunk tells the rest):"
    )
    seconds, untimed = 0.0, 0
    for phase, cell, name, phase_protocol, _ in sorted(jobs, key=lambda j: (j[1], j[0] != "reference")):
        bound = token_bound(phase, phase_protocol, problem_count(cells[cell].benchmark, sizes))
        rate = declared_rate(models[cell])
        if bound is None:
            untimed += 1
            lines.append(f"    {cell} {phase} ({name}): the work is unknown until the problems are read")
            continue
        seconds, untimed = (seconds + bound / rate, untimed) if rate else (seconds, untimed + 1)
        lines.append(f"    {cell} {phase} ({name}): at most {bound:,} tokens, {at_declared_rate(bound, models[cell])}")
    timed = len(jobs) - untimed
    total = at_most(seconds) if timed else "unknown before generation starts"
    return [*lines, f"  total: {total}" + (f" for {timed} of {len(jobs)} phases" if 0 < timed < len(jobs) else "")]


def study_token_bound(
    cells: Mapping[str, Cell], protocols: Mapping[str, dict], generating: Sequence[str], sizes: Mapping[str, int]
) -> tuple[int, dict[str, int], list[str]]:
    """(tokens in all, tokens by cell, cells whose problem count is unknown before the run) the study's
    generation can take at most: each cell's reference chains (one file per reference setting) and the
    continuations of each variant that generates (``generating``), every output at its budget."""
    by_cell, unknown = {}, []
    references = {reference_id(p): p for p in protocols.values()}
    for name, cell in cells.items():
        n = problem_count(cell.benchmark, sizes)
        if n is None:
            unknown.append(name)
            continue
        chains = sum(token_bound("reference", p, n) for p in references.values())
        by_cell[name] = chains + sum(token_bound("continuations", protocols[v], n) for v in generating)
    return sum(by_cell.values()), by_cell, unknown


def check_token_budget(
    study: str,
    cells: Mapping[str, Cell],
    protocols: Mapping[str, dict],
    generating: Sequence[str],
    sizes: Mapping[str, int],
    budget: int | None = None,
) -> int:
    """The study's token bound (``study_token_bound``) if it is within ``budget`` (the config's
    ``token_budget``, else DEFAULT_TOKEN_BUDGET); BudgetError, one line saying how to lower or raise
    it, otherwise. Checked as the workflow is read, before any job and at a dry run."""
    budget = DEFAULT_TOKEN_BUDGET if budget is None else budget
    total, by_cell, _ = study_token_bound(cells, protocols, generating, sizes)
    if total > budget:
        largest = max(by_cell, key=by_cell.get)
        raise BudgetError(
            f"study '{study}' may generate up to {total:,} tokens (every output at its budget; cell {largest}: "
            f"{by_cell[largest]:,}), more than its token budget of {budget:,}: lower the protocol's m, "
            "reference_max_tokens or continuation_max_tokens, or raise the budget "
            "(token_budget: N in the config, or --config token_budget=N)"
        )
    return total


def first_chunk_text(seconds: float, rows: int, pending_rows: int) -> tuple[float, str]:
    """The rest of a phase at its first chunk's rate: that chunk drew ``rows`` of the phase's
    ``pending_rows`` in ``seconds``. An estimate, not a bound: chunks follow the request order, so
    later ones may hold longer prompts (later prefixes) or rows that stop sooner."""
    rest = max(pending_rows - rows, 0)
    remaining = seconds / rows * rest if rows else float("nan")
    return remaining, (
        f"its first {rows:,} of {pending_rows:,} pending rows took {duration(seconds).removeprefix('about ')}, "
        f"so {duration(remaining)} for the other {rest:,} at that rate"
    )


class Forecast:
    """The observer ``cotdyn.generation.run`` tells of a phase (``before``, ``first_chunk``, ``after``):
    before it, its exact pending work and the time at the declared rate; after its first chunk, when
    more follow, the rest at that chunk's rate."""

    def before(self, job) -> None:
        pending = [r for r in job.requests if r.key(job.backend.model_revision) not in job.cache]
        rows = sum(r.n for r in pending)
        bound = sum(r.n * r.sampling.max_tokens for r in pending)
        line = f"{rows:,} rows to generate ({len(job.requests) - len(pending):,} requests in the cache)"
        if rows:
            line += f", at most {bound:,} tokens, {at_declared_rate(bound, job.model)}"
        print(f"{job.label}: {line}", flush=True)

    def first_chunk(self, job, rows: int, pending_rows: int, seconds: float) -> None:
        if rows < pending_rows:
            print(f"{job.label}: {first_chunk_text(seconds, rows, pending_rows)[1]}", flush=True)

    def after(self, job, stats) -> None:
        pass
