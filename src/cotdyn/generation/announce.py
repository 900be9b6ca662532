"""What a run is about to do, printed before its first job (docs/design.md section 8: progress and cost)."""

from __future__ import annotations

from typing import Mapping, Sequence

from cotdyn.generation import timings
from cotdyn.plan.config import Cell, reference_id

# The most tokens a study's generation may take at its upper bound unless its config raises it
# (``token_budget``): 100 billion, some six times the largest shipped config's bound (the registered
# panel's sweeps, 17.2 billion, its uncapped variant bounded by every token ending a step). An m or a
# budget mistyped by orders of magnitude (m = 10^9: 16 trillion) stops the run before it starts.
DEFAULT_TOKEN_BUDGET = 100_000_000_000


class BudgetError(ValueError):
    """A study whose generation's upper bound exceeds its token budget."""


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


def run_summary(
    study: str,
    cells: dict[str, Cell],
    protocol: dict,
    cache: str,
    sizes: Mapping[str, int] | None = None,
    jobs: Sequence[tuple[str, str, str, dict, int | None]] | None = None,
    models: Mapping[str, dict] | None = None,
    host: dict | None = None,
) -> list[str]:
    """Lines saying what the run generates, where, and with what, before any job starts, and (given
    ``jobs`` and ``models``) how long its generation should take (``time_estimate``).
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
    if jobs is not None and models is not None:
        lines += time_estimate(cells, cache, sizes or {}, jobs, models, host or timings.machine())
    return lines


def generation_phases(
    cells: Mapping[str, Cell],
    sizes: Mapping[str, int],
    jobs: Sequence[tuple[str, str, str, dict, int | None]],
    models: Mapping[str, dict],
) -> list[timings.Phase]:
    """The phases of the run's generation ``jobs``: (phase, cell, its reference setting or variant,
    protocol, threads) each; ``models``: the model entry each cell's jobs get."""
    return [
        timings.Phase(
            phase,
            cell,
            models[cell],
            cells[cell].answer_rule,
            protocol,
            problem_count(cells[cell].benchmark, sizes),
            threads,
            name,
            cells[cell].benchmark,
        )
        for phase, cell, name, protocol, threads in jobs
    ]


def time_estimate(
    cells: Mapping[str, Cell],
    cache: str,
    sizes: Mapping[str, int],
    jobs: Sequence[tuple[str, str, str, dict, int | None]],
    models: Mapping[str, dict],
    host: dict,
) -> list[str]:
    """Per phase and in total, the expected generation time from earlier timings of the same model,
    settings and machine in the ledger under ``cache`` (``cotdyn.generation.timings``), else the work bound; only
    for the share of each phase's requests the ledger does not place in the cache."""
    phases = generation_phases(cells, sizes, jobs, models)
    if not phases:
        return ["  time: no generation in this run (its chains and samples are written already)"]
    observations, warnings = timings.read_observations(cache)
    lines = [f"  {w}" for w in warnings]
    lines.append("  time estimate (generation only, not model loading; requests already in the cache take no time):")
    estimates = []
    for cell in dict.fromkeys(p.cell for p in phases):
        for phase in sorted((p for p in phases if p.cell == cell), key=lambda p: timings.PHASES.index(p.phase)):
            estimate = timings.estimate(phase, observations, host, cache)
            estimates.append(estimate)
            lines.append(f"    {cell} {phase.phase} ({phase.name}): {estimate.text}")
    lines.append(f"  total: {total_text(estimates)}")
    return lines


def total_text(estimates: Sequence[timings.Estimate]) -> str:
    timed = [e for e in estimates if e.seconds is not None]
    if all(e.kind == "cached" for e in estimates):
        return "no generation expected (every phase's requests are in the cache)"
    if not timed:
        return "unknown before generation starts (no timing of these phases on this machine yet)"
    seconds = sum(e.seconds for e in timed)
    bounded = sum(1 for e in timed if e.kind == "upper bound")
    text = "no generation expected" if all(e.kind == "cached" for e in timed) else timings.duration(seconds)
    if bounded:
        text += f" ({bounded} of {len(timed)} phases timed by their upper bound)"
    if len(timed) < len(estimates):
        text += f" for {len(timed)} of {len(estimates)} phases; the others have no timing yet"
    return text


def _continuation_bound(protocol: dict, problems: int) -> int:
    """``timings.token_bound`` of the continuations; with step checkpoints and no cap, every token of
    the chain may end a step, so at most reference_max_tokens + 1 prefixes."""
    bound = timings.token_bound("continuations", protocol, problems)
    if bound is None:
        prefixes = protocol["reference_max_tokens"] + 1
        bound = problems * prefixes * protocol["m"] * protocol["continuation_max_tokens"]
    return bound


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
        chains = sum(timings.token_bound("reference", p, n) for p in references.values())
        by_cell[name] = chains + sum(_continuation_bound(protocols[v], n) for v in generating)
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
