"""The I/O shell around ``requests``: read inputs, call a backend through the cache, write artifacts.

Snakemake's scripts call these functions; everything they compute lives in ``requests``. An
observer passed in (``cotdyn.generation.estimate.Forecast``) is told of each phase before, after its
first chunk and after; nothing here estimates its time.

Writes go through ``cotdyn.files.writers`` (a temporary name renamed into place), so a killed job
leaves no torn artifact.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from cotdyn.dataset.benchmarks import Problem, problems_from_table
from cotdyn.files.writers import write_json, write_parquet
from cotdyn.generation import requests as P
from cotdyn.generation.backends import make_backend, registry
from cotdyn.generation.backends.base import GenerationStats
from cotdyn.generation.cache import GenerationCache, generate, revision_folder


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
        # when this phase's generation began, by this machine's clock: the audit compares the
        # registration's attested time with the earliest (cotdyn.audit.registration)
        "started_utc": _utc(time.time() - stats.seconds),
        # the backend's own package and the packages its declaration names, as this job had them
        "packages": registry.package_versions(backend.name),
    }


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class GenerationJob:
    """One generation phase as an observer sees it: what it generates, for which cell, into which cache."""

    phase: str  # "reference" or "continuations"
    cell: str
    model: dict
    benchmark: str
    protocol: dict  # as drawn: ``m`` is the samples per prefix actually drawn
    problems: int  # the problems (reference) or chains (continuations) it generates for
    cache_dir: Path
    backend: object
    cache: GenerationCache
    requests: list
    label: str  # the progress bar's


class Unobserved:
    """The observer of a phase nobody watches."""

    def before(self, job: GenerationJob) -> None:
        pass

    def first_chunk(self, job: GenerationJob, rows: int, pending_rows: int, seconds: float) -> None:
        pass

    def after(self, job: GenerationJob, stats: GenerationStats) -> None:
        pass


def _generate(phase: str, model: dict, protocol: dict, cell: str, benchmark: str, cache_dir, backend, problems: int,
              requests: list, label: str, observer):  # fmt: skip
    """The phase's completions through the cache, its observer told before, after the first chunk
    and after (``Unobserved`` when none), and its stats."""
    job = GenerationJob(phase, cell, model, benchmark, protocol, problems, Path(cache_dir), backend,
                        _cache(cache_dir, backend), requests, label)  # fmt: skip
    observer = observer or Unobserved()
    observer.before(job)

    def first_chunk(rows: int, pending_rows: int, seconds: float) -> None:
        observer.first_chunk(job, rows, pending_rows, seconds)

    completions, stats = generate(
        backend, requests, job.cache, model.get("chunk_size", 0), desc=label, on_first_chunk=first_chunk
    )
    return completions, stats, lambda: observer.after(job, stats)


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
    observer=None,
) -> None:
    """``backend``: one already built from ``model`` (a check that times one engine across phases);
    ``observer``: told ``before(job)`` the generation, ``first_chunk(job, rows, pending_rows, seconds)``
    once the first chunk of fresh rows is drawn, and ``after(job, stats)`` the writes
    (``cotdyn.generation.estimate.Forecast``)."""
    problems = read_problems(problems_path)[:limit]
    backend = backend or _backend(model, problems, benchmark)
    prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in problems]
    requests = P.reference_requests(problems, prompts, protocol, cell)
    completions, stats, after = _generate("reference", model, protocol, cell, benchmark, cache_dir, backend,
                                          len(problems), requests, f"{cell} reference chains", observer)  # fmt: skip
    write_parquet(P.chains_table(problems, prompts, completions, benchmark), chains_out)
    write_json(_generation_log(backend, stats, P.reference_sampling(protocol), "reference"), log_out)
    after()


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
    observer=None,
) -> None:
    """``backend`` and ``observer`` as in ``run_reference``."""
    problems = read_problems(problems_path)
    chains = pd.read_parquet(chains_path)
    backend = backend or _backend(model, problems, benchmark)
    plan = P.prefix_plan(chains, protocol, backend.tokenizer.decode, benchmark)
    requests = P.continuation_requests(chains, plan, protocol, cell, n)
    # n overrides m (the m sweep's N): an observer sees the samples per prefix actually drawn
    drawn = {**protocol, "m": n or protocol["m"]}
    completions, stats, after = _generate("continuations", model, drawn, cell, benchmark, cache_dir, backend,
                                          len(chains), requests, f"{cell} continuations", observer)  # fmt: skip
    options = {p.problem_id: p.options for p in problems if p.options}
    honoured = getattr(backend, "seeds_honoured", None)  # a served model's sampler may honour fewer seeds
    write_parquet(P.samples_table(plan, requests, completions, benchmark, options, honoured), samples_out)
    write_json(_generation_log(backend, stats, P.continuation_sampling(protocol), "continuations"), log_out)
    after()
