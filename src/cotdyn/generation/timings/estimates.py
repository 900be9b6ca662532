"""A pending phase's expected time from the ledger's observations of the same setup, never an invented
speed: without one, the work bound in tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from cotdyn.generation.backends import registry
from cotdyn.generation.cache import revision_folder
from cotdyn.generation.timings.identity import budgets, model_identity, speed_settings, work
from cotdyn.protocol.segment import checkpoints


@dataclass(frozen=True)
class Phase:
    """A generation phase a run is about to do: one cell's reference chains or continuations."""

    phase: str
    cell: str
    model: dict
    benchmark: str
    protocol: dict
    problems: int | None
    threads: int | None = None
    name: str = ""  # its reference setting or variant
    benchmark_entry: dict | None = None  # the cell's benchmark entry (``problem_source``)


@dataclass(frozen=True)
class Estimate:
    # "expected" (observed length and rate), "upper bound" (bound at the observed rate), "unknown",
    # "cached" (every request in the cache)
    kind: str
    seconds: float | None  # None when no matching timing gives a time
    bound_tokens: int | None  # most tokens the phase can generate; None when unknown before it runs
    tokens_per_second: float | None
    rate_from: int  # observations the rate comes from
    latest: str | None  # when the newest of them was recorded
    text: str


def same_setup(entry: dict, phase: Phase, host: dict) -> bool:
    """Whether ``entry`` timed the same model, speed settings, machine and phase as ``phase``. Torch's
    thread count must agree where both are known."""
    threads = entry.get("torch_threads")
    return (
        entry["phase"] == phase.phase
        and entry["model"] == model_identity(phase.model)
        and entry["settings"] == speed_settings(phase.model)
        and entry["machine"] == host
        and (threads is None or phase.threads is None or threads == phase.threads)
    )


def token_bound(phase: str, protocol: dict, problems: int | None) -> int | None:
    """The most tokens a phase can generate: every chain at its budget; for continuations, every
    prefix such a chain can have (token checkpoints: one per stride; step checkpoints: the cap + 1,
    unknown without a cap) times m continuations at their budget."""
    if problems is None:
        return None
    if phase == "reference":
        return problems * protocol["reference_max_tokens"]
    if protocol["checkpoints"] == "tokens":
        prefixes = len(checkpoints(protocol["reference_max_tokens"], protocol["checkpoint_stride"]))
    elif protocol.get("cap") is not None:
        prefixes = protocol["cap"] + 1
    else:
        return None
    return problems * prefixes * protocol["m"] * protocol["continuation_max_tokens"]


def rate(entries: Sequence[dict]) -> float | None:
    """Tokens per second over ``entries`` together; None where they generated nothing or took no time."""
    tokens = sum(e["generated_tokens"] for e in entries)
    seconds = sum(e["seconds"] for e in entries)
    return tokens / seconds if tokens > 0 and seconds > 0 else None


def tokens_per_problem(entries: Sequence[dict]) -> float | None:
    """Tokens a problem takes: fresh tokens per fresh request, times requests per problem (a phase half
    served from the cache still tells the length of what it generated)."""
    usable = [e for e in entries if e["fresh_requests"] > 0 and e["problems"] > 0]
    if not usable:
        return None
    per_request = sum(e["generated_tokens"] for e in usable) / sum(e["fresh_requests"] for e in usable)
    requests_per_problem = sum(e["requests"] for e in usable) / sum(e["problems"] for e in usable)
    return per_request * requests_per_problem


NO_TIMING = "no timing of this model on this machine yet; the progress bars give the rate once generation starts"


@dataclass(frozen=True)
class Coverage:
    """How much of a phase's work earlier runs left in the cache."""

    requests: int  # the phase's requests, as the earlier runs of the same work counted them
    cached: int  # of those, the fresh requests of the runs whose shards all still exist
    runs: int  # those runs


def coverage(phase: Phase, observations: Iterable[dict], cache_dir) -> Coverage | None:
    """What the ledger says of ``phase``'s requests in the cache under ``cache_dir``: the observations of
    the same ``work`` whose shard files all still exist (one stat each) cover their fresh requests,
    a shard counted once however many observations name it; None when no observation did this work.
    Requests a killed run cached without recording an observation are not counted."""
    key = work(
        phase.phase, phase.model, phase.cell, phase.benchmark, phase.protocol, phase.problems, phase.benchmark_entry
    )
    same = [e for e in observations if key is not None and e.get("work") == key]
    if not same:
        return None
    present = [
        e
        for e in same
        if e.get("shards") and all((revision_folder(cache_dir, e["revision"]) / name).is_file() for name in e["shards"])
    ]
    shards = {name: count for e in present for name, count in e["shards"].items()}
    requests = max(e["requests"] for e in same)
    return Coverage(requests, min(requests, sum(shards.values())), len(present))


def estimate(phase: Phase, observations: Iterable[dict], host: dict, cache_dir=None) -> Estimate:
    """Expected seconds of ``phase`` = problems x tokens per problem / tokens per second, both observed
    with the same model, speed settings and machine (tokens per problem also on the same benchmark
    and budgets); else the work bound, at the observed rate where there is one. With ``cache_dir``,
    only the share of its requests not in the cache there (``coverage``) counts."""
    observations = list(observations)
    cached = coverage(phase, observations, cache_dir) if cache_dir is not None else None
    if cached is None or cached.cached == 0:
        return _estimate(phase, observations, host, 1.0, "")
    runs = f"{cached.runs} earlier run{'s' if cached.runs != 1 else ''}"
    if cached.cached >= cached.requests:
        return Estimate("cached", 0.0, 0, None, 0, None, f"in the cache from {runs}: no generation expected")
    share = (cached.requests - cached.cached) / cached.requests
    note = f"{cached.cached:,} of {cached.requests:,} requests in the cache from {runs}, so {share:.1%} of "
    return _estimate(phase, observations, host, share, note)


def _estimate(phase: Phase, observations: list[dict], host: dict, share: float, note: str) -> Estimate:
    """``estimate`` of the ``share`` of ``phase`` not in the cache; ``note`` says why it is a share."""
    matching = [e for e in observations if same_setup(e, phase, host)]
    timed = [e for e in matching if e["generated_tokens"] > 0 and e["seconds"] > 0]
    speed = rate(timed)
    whole = token_bound(phase.phase, phase.protocol, phase.problems)
    bound = math.ceil(whole * share) if whole is not None else None
    bound_text = f"at most {whole:,} tokens" if whole is not None else _unknown_bound(phase)
    if speed is None:
        return Estimate("unknown", None, bound, None, 0, None, f"{note}{bound_text}; {NO_TIMING}")
    latest = max(e["recorded"] for e in timed)
    source = f"{len(timed)} timing{'s' if len(timed) != 1 else ''} on this machine, latest {latest}"
    batches = _batch_caveat(phase, timed, share)
    alike = [
        e for e in timed if e["benchmark"] == phase.benchmark and e["budgets"] == budgets(phase.protocol, phase.phase)
    ]
    per_problem = tokens_per_problem(alike)
    if per_problem is not None and phase.problems is not None:
        seconds = phase.problems * share * per_problem / speed
        text = (
            f"{duration(seconds)} ({note}{phase.problems} problems x {per_problem:,.0f} tokens / "
            f"{per_second(speed)}; from {source}{batches})"
        )
        return Estimate("expected", seconds, bound, speed, len(timed), latest, text)
    if bound is not None:
        seconds = bound / speed
        text = (
            f"at most {duration(seconds)} ({note}{bound_text} at {per_second(speed)} from {source}; "
            f"no timing of these budgets on this benchmark yet{batches})"
        )
        return Estimate("upper bound", seconds, bound, speed, len(timed), latest, text)
    return Estimate(
        "unknown", None, None, speed, len(timed), latest, f"{note}{bound_text}; {per_second(speed)} from {source}"
    )


def _batch_caveat(phase: Phase, timed: Sequence[dict], share: float) -> str:
    """A caveat when the rate was timed on fewer problems than are pending: a batched backend's rate
    depends on how full its batches are, so it is quoted, not scaled. Empty where the timed batches
    were already full (a batch of the backend's ``batch_size`` rows) or the backend does not batch."""
    batching = registry.spec(phase.model.get("backend")).batching  # as its declaration says
    most = max(e["problems"] for e in timed)
    if batching is None or phase.problems is None:
        return ""
    if most >= phase.problems * share:
        return ""
    rows = registry.options(phase.model).get("batch_size")
    if batching == "rows" and max(e.get("samples", 0) for e in timed) >= rows:
        return ""
    return f"; that rate was timed on at most {most} problems, and it depends on how full the batches are"


def continuation_forecast(
    phase: Phase, requests: int, cached: int, observations: Iterable[dict], host: dict
) -> tuple[float | None, str]:
    """At the start of a continuations job, when its requests are known: the expected seconds (or None)
    and a line saying how they follow, from continuation timings of the same setup (tokens per request
    also of the same benchmark and budgets). The reference phase's rate is quoted but never used:
    continuations fill batches of many more rows, so it says little about their speed."""
    pending = requests - cached
    head = f"{pending} of {requests} continuation requests to generate ({cached} in the cache)"
    if pending <= 0:
        return 0.0, f"{head}: no generation"
    most = pending * phase.protocol["m"] * phase.protocol["continuation_max_tokens"]
    timed = [e for e in observations if e["generated_tokens"] > 0 and e["seconds"] > 0]
    own = [e for e in timed if same_setup(e, phase, host)]
    speed = rate(own)
    if speed is None:
        reference = rate([e for e in timed if same_setup(e, replace(phase, phase="reference"), host)])
        aside = f" (its reference chains ran at {per_second(reference)}, in fewer rows per batch)" if reference else ""
        return (
            None,
            f"{head}, at most {most:,} tokens; no timing of continuations of this model on this machine yet{aside}; the progress bar gives the rate",
        )
    alike = [
        e for e in own if e["benchmark"] == phase.benchmark and e["budgets"] == budgets(phase.protocol, phase.phase)
    ]
    fresh = sum(e["fresh_requests"] for e in alike)
    if fresh:
        per_request = sum(e["generated_tokens"] for e in alike) / fresh
        seconds = pending * per_request / speed
        how = f"{pending} x {per_request:,.0f} tokens / {per_second(speed)}"
    else:
        seconds = most / speed
        how = f"at most {most:,} tokens at {per_second(speed)}"
    latest = max(e["recorded"] for e in own)
    count = f"{len(own)} timing{'s' if len(own) != 1 else ''}"
    return seconds, f"{head}: {'' if fresh else 'at most '}{duration(seconds)} ({how}; from {count}, latest {latest})"


def _unknown_bound(phase: Phase) -> str:
    if phase.problems is None:
        return "the work is unknown until the problems are read (their count is in their file)"
    return "the number of prefixes is unknown until the chains exist (step checkpoints without a cap)"


def per_second(tokens_per_second: float) -> str:
    """A rate to three significant figures at most: '1.89 tokens/s', '32.8 tokens/s', '1,240 tokens/s'."""
    if tokens_per_second >= 100:
        return f"{tokens_per_second:,.0f} tokens/s"
    return f"{float(f'{tokens_per_second:.3g}'):g} tokens/s"


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
