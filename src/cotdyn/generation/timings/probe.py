"""A first timing where the ledger has none: two short generations of one batch tell a decode step's seconds."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Sequence

from cotdyn.generation.backends import registry
from cotdyn.generation.timings.estimates import duration

# The decode steps of the two short generations that time one step of a batched backend: the
# difference of their times is steps alone, prefill and set-up cancel out.
PROBE_STEPS = (2, 10)


def one_batch(requests: Sequence, batch_rows: int) -> list:
    """The first requests of ``requests`` up to ``batch_rows`` rows (samples), the last one cut to fit."""
    batch, rows = [], 0
    for request in requests:
        take = min(request.n, batch_rows - rows)
        batch.append(replace(request, n=take) if take < request.n else request)
        rows += take
        if rows >= batch_rows:
            break
    return batch


def step_seconds(short: tuple[float, int], long: tuple[float, int]) -> tuple[float, float] | None:
    """From two timed generations of the same batch, each (seconds, decode steps it ran): the seconds
    of one decode step and of everything else (prefill, set-up); None when the longer one ran no
    more steps (its rows stopped early), so no step can be told apart."""
    (short_s, short_steps), (long_s, long_steps) = short, long
    if long_steps <= short_steps:
        return None
    step = max(long_s - short_s, 0.0) / (long_steps - short_steps)
    return step, max(short_s - short_steps * step, 0.0)


def probe_text(step: float, fixed: float, rows: int, batch_rows: int, max_tokens: int) -> tuple[float, str]:
    """The phase's time if each of its ``rows`` ran to ``max_tokens``, in batches of ``batch_rows``,
    at the probed step. An estimate, not a bound: rows that stop early leave the batch (shorter),
    while longer prompts and a growing cache slow each step (longer). On the embedded default it
    said 53 s for reference chains that took 28 s, and 54 s for continuations that took 58 s."""
    batches = math.ceil(rows / batch_rows) if rows else 0
    seconds = batches * (fixed + max_tokens * step)
    return seconds, (
        f"no timing of this model on this machine yet; a probe of {min(rows, batch_rows)} rows ran "
        f"{step:.3g} s a decode step, so {duration(seconds)} if all {rows:,} rows ran to their "
        f"{max_tokens}-token budget at that step time"
    )


def run_probe(backend, pending: list, label: str) -> None:
    """Where no timing of this phase exists: time one decode step of the backend on one full batch of
    the ``pending`` requests (two short generations, never cached, their samples discarded) and print
    what the phase would take if every row ran to its budget. Only for a backend whose declaration
    asks for it (``timing_probe``: the transformers backend): the simulated one takes no time, and
    vLLM's scheduler or a server is no batch to probe."""
    declared = registry.REGISTRY.get(getattr(backend, "name", None))
    if declared is None or not declared.timing_probe or not pending:
        return
    probe = one_batch(pending, backend.batch_size)
    timed = []
    for steps in PROBE_STEPS:
        short = [replace(r, sampling=replace(r.sampling, max_tokens=steps)) for r in probe]
        started = time.perf_counter()
        out = backend.generate(short, desc=f"{label}: timing probe")
        timed.append((time.perf_counter() - started, max(len(c.token_ids) for cs in out for c in cs)))
    step = step_seconds(*timed)
    if step is None:
        print(f"{label}: no timing yet, and the timing probe's rows stopped too soon to time a step", flush=True)
        return
    _, line = probe_text(*step, sum(r.n for r in pending), backend.batch_size, pending[0].sampling.max_tokens)
    print(f"{label}: {line}", flush=True)
