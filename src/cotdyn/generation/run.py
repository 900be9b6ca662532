"""The I/O shell around ``protocol``: read inputs, call a backend through the cache, write artifacts.

Snakemake's scripts call these three functions; everything they compute lives in ``protocol``.
Writes go through ``cotdyn.files.writers`` (a temporary name renamed into place), so a killed job
leaves no torn artifact. In the workflow a phase's outputs are written once: a second job of the
same cell and phase (an orphan of a lost controller and its resubmission, docs/cluster.md) leaves
what the first wrote as it is.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pandas as pd

from cotdyn.dataset.benchmarks import Problem, problems_from_table
from cotdyn.files.writers import json_bytes, parquet_bytes, write_bytes_once, write_json, write_parquet
from cotdyn.generation import requests as P
from cotdyn.generation import timings
from cotdyn.generation.backends import make_backend
from cotdyn.generation.cache import GenerationCache, generate, revision_folder


def _write_phase(table: pd.DataFrame, table_out, log: dict, log_out, first_writer_wins: bool) -> None:
    """The phase's table, then its generation.json. ``first_writer_wins`` (the workflow's jobs): each
    is written only where no file is there yet, so a second job of the cell and phase overwrites
    neither (``writers.write_bytes_once``); else both are replaced."""
    if not first_writer_wins:
        write_parquet(table, table_out)
        write_json(log, log_out)
        return
    wrote_table = write_bytes_once(parquet_bytes(table), table_out)
    wrote_log = write_bytes_once(json_bytes(log), log_out)
    if not (wrote_table and wrote_log):
        kept = [str(p) for p, wrote in ((table_out, wrote_table), (log_out, wrote_log)) if not wrote]
        print(f"written by another job of this cell and phase, left as they are: {', '.join(kept)}", flush=True)


def read_problems(path: str | Path) -> list[Problem]:
    return problems_from_table(pd.read_parquet(path))


def _backend(model: dict, problems: list[Problem], benchmark: str):
    return make_backend(model, {p.question: p.gold for p in problems}, benchmark)


def _cache(cache_dir, backend) -> GenerationCache:
    return GenerationCache(revision_folder(cache_dir, backend.model_revision))


def _generation_log(backend, stats, sampling, phase: str) -> dict:
    return {
        "phase": phase,
        "backend": backend.describe(),
        "effective_sampling": backend.effective_sampling(sampling),
        "requests": stats.requests,
        "cached_requests": stats.cached_requests,
        "samples": stats.samples,
        "calls": stats.calls,
        "prompt_tokens": stats.prompt_tokens,
        "generated_tokens": stats.generated_tokens,
        "seconds": round(stats.seconds, 3),
    }


def _record_timing(
    cache_dir,
    backend,
    stats,
    model: dict,
    protocol: dict,
    phase: str,
    cell: str,
    benchmark: str,
    problems: int,
    benchmark_entry: dict | None,
):
    """Add this phase to the timing ledger (``cotdyn.generation.timings``) when it generated fresh tokens: a phase
    served whole from the cache says nothing about speed, and its requests are covered by the shards
    of the observations before it."""
    if stats.generated_tokens <= 0:
        return
    entry = timings.observation(
        phase=phase,
        work=timings.work(phase, model, cell, benchmark, protocol, problems, benchmark_entry),
        shards=stats.shards,
        model=model,
        revision=backend.model_revision,
        benchmark=benchmark,
        protocol=protocol,
        problems=problems,
        requests=stats.requests,
        cached_requests=stats.cached_requests,
        samples=stats.samples,
        generated_tokens=stats.generated_tokens,
        seconds=stats.seconds,
        host=timings.machine(),
        threads=timings.torch_threads(),
        recorded=timings.now(),
    )
    timings.write_observation(entry, cache_dir)


def _forecast(cache_dir, backend, cache, requests, model: dict, protocol: dict, cell: str, benchmark: str) -> None:
    """Print the continuations' expected time now that their requests are known (``cotdyn.generation.timings``),
    from the ledger, else from a timing probe."""
    keys = {r.key(backend.model_revision) for r in requests}
    cached = sum(1 for k in keys if k in cache)
    observations, warnings = timings.read_observations(cache_dir)
    phase = timings.Phase("continuations", cell, model, benchmark, protocol, None, timings.torch_threads())
    seconds, line = timings.continuation_forecast(phase, len(keys), cached, observations, timings.machine())
    print("\n".join(warnings + [f"{cell} continuations: {line}"]), flush=True)
    if seconds is None:
        _probe(backend, _pending(requests, backend, cache), f"{cell} continuations")


def _probe(backend, pending: list, label: str) -> None:
    """Where no timing of this phase exists: time one decode step of the backend on one full batch of
    the ``pending`` requests (two short generations, never cached, their samples discarded) and print
    what the phase would take if every row ran to its budget. Only for the transformers backend: the
    simulated one takes no time, and vLLM's scheduler is no batch to probe."""
    if getattr(backend, "name", None) != "transformers" or not pending:
        return
    probe = timings.one_batch(pending, backend.batch_size)
    timed = []
    for steps in timings.PROBE_STEPS:
        short = [dataclasses.replace(r, sampling=dataclasses.replace(r.sampling, max_tokens=steps)) for r in probe]
        started = time.perf_counter()
        out = backend.generate(short, desc=f"{label}: timing probe")
        timed.append((time.perf_counter() - started, max(len(c.token_ids) for cs in out for c in cs)))
    step = timings.step_seconds(*timed)
    if step is None:
        print(f"{label}: no timing yet, and the timing probe's rows stopped too soon to time a step", flush=True)
        return
    _, line = timings.probe_text(*step, sum(r.n for r in pending), backend.batch_size, pending[0].sampling.max_tokens)
    print(f"{label}: {line}", flush=True)


def _pending(requests, backend, cache) -> list:
    return [r for r in requests if r.key(backend.model_revision) not in cache]


def run_reference(
    problems_path,
    model: dict,
    protocol: dict,
    cell: str,
    benchmark: str,
    cache_dir,
    chains_out,
    log_out,
    limit: int | None = None,
    backend=None,
    benchmark_entry: dict | None = None,
    first_writer_wins: bool = False,
) -> None:
    """``backend``: one already built from ``model`` (a check that times one engine across phases);
    ``benchmark_entry``: the cell's benchmark entry, which names the work in the timing ledger;
    ``first_writer_wins``: leave outputs another job already wrote as they are (``_write_phase``)."""
    problems = read_problems(problems_path)[:limit]
    backend = backend or _backend(model, problems, benchmark)
    prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in problems]
    requests = P.reference_requests(problems, prompts, protocol, cell)
    cache = _cache(cache_dir, backend)
    ledger, _ = timings.read_observations(cache_dir)
    phase = timings.Phase("reference", cell, model, benchmark, protocol, len(problems), timings.torch_threads())
    if timings.estimate(phase, ledger, timings.machine()).kind == "unknown":
        _probe(backend, _pending(requests, backend, cache), f"{cell} reference chains")
    completions, stats = generate(backend, requests, cache, model.get("chunk_size", 0), desc=f"{cell} reference chains")
    chains = P.chains_table(problems, prompts, completions, benchmark)
    log = _generation_log(backend, stats, P.reference_sampling(protocol), "reference")
    _write_phase(chains, chains_out, log, log_out, first_writer_wins)
    _record_timing(
        cache_dir, backend, stats, model, protocol, "reference", cell, benchmark, len(problems), benchmark_entry
    )


def run_continuations(
    problems_path,
    chains_path,
    model: dict,
    protocol: dict,
    cell: str,
    benchmark: str,
    cache_dir,
    samples_out,
    log_out,
    n: int | None = None,
    backend=None,
    benchmark_entry: dict | None = None,
    first_writer_wins: bool = False,
) -> None:
    problems = read_problems(problems_path)
    chains = pd.read_parquet(chains_path)
    backend = backend or _backend(model, problems, benchmark)
    plan = P.prefix_plan(chains, protocol, backend.tokenizer.decode, benchmark)
    requests = P.continuation_requests(chains, plan, protocol, cell, n)
    # n overrides m (the m sweep's N): the ledger keeps the samples per prefix actually drawn
    drawn = {**protocol, "m": n or protocol["m"]}
    cache = _cache(cache_dir, backend)
    _forecast(cache_dir, backend, cache, requests, model, drawn, cell, benchmark)
    completions, stats = generate(backend, requests, cache, model.get("chunk_size", 0), desc=f"{cell} continuations")
    options = {p.problem_id: p.options for p in problems if p.options}
    samples = P.samples_table(plan, requests, completions, benchmark, options)
    log = _generation_log(backend, stats, P.continuation_sampling(protocol), "continuations")
    _write_phase(samples, samples_out, log, log_out, first_writer_wins)
    _record_timing(
        cache_dir, backend, stats, model, drawn, "continuations", cell, benchmark, len(chains), benchmark_entry
    )
