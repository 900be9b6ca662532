"""The timing ledger watching a generation phase from outside: ``cotdyn.generation.run`` calls
``before(job)`` once the phase's requests are known and ``after(job, stats)`` once its outputs are
written, and knows nothing else of timings.

``job`` is a ``cotdyn.generation.run.GenerationJob`` (its phase, cell, model, benchmark, protocol as
drawn, problem count, cache folder, backend, cache, requests and progress label); ``stats`` the
cache's ``GenerationStats`` of the phase.
"""

from __future__ import annotations

from cotdyn.generation.timings.estimates import Phase, continuation_forecast, estimate
from cotdyn.generation.timings.identity import machine, torch_threads, work
from cotdyn.generation.timings.ledger import now, observation, read_observations, write_observation
from cotdyn.generation.timings.probe import run_probe


class TimingObserver:
    """Before a phase, its expected time: reference chains are probed where the ledger has no timing of
    them; continuations print their forecast from the ledger, else a probe's. After it, its observation
    in the ledger under the job's cache folder, when it generated fresh tokens.

    ``benchmark_entry``: the cell's benchmark entry, which names the work in the ledger."""

    def __init__(self, benchmark_entry: dict | None = None):
        self.benchmark_entry = benchmark_entry

    def before(self, job) -> None:
        if job.phase == "reference":
            ledger, _ = read_observations(job.cache_dir)
            phase = Phase("reference", job.cell, job.model, job.benchmark, job.protocol, job.problems, torch_threads())
            if estimate(phase, ledger, machine()).kind == "unknown":
                run_probe(job.backend, _pending(job), job.label)
        else:
            self._forecast(job)

    def _forecast(self, job) -> None:
        """Print the continuations' expected time now that their requests are known, from the ledger,
        else from a timing probe."""
        keys = {r.key(job.backend.model_revision) for r in job.requests}
        cached = sum(1 for k in keys if k in job.cache)
        observations, warnings = read_observations(job.cache_dir)
        phase = Phase("continuations", job.cell, job.model, job.benchmark, job.protocol, None, torch_threads())
        seconds, line = continuation_forecast(phase, len(keys), cached, observations, machine())
        print("\n".join(warnings + [f"{job.cell} continuations: {line}"]), flush=True)
        if seconds is None:
            run_probe(job.backend, _pending(job), job.label)

    def after(self, job, stats) -> None:
        """Add the phase to the ledger when it generated fresh tokens: a phase served whole from the
        cache says nothing about speed, and its requests are covered by the shards of the observations
        before it."""
        if stats.generated_tokens <= 0:
            return
        entry = observation(
            phase=job.phase,
            work=work(job.phase, job.model, job.cell, job.benchmark, job.protocol, job.problems, self.benchmark_entry),
            shards=stats.shards,
            model=job.model,
            revision=job.backend.model_revision,
            benchmark=job.benchmark,
            protocol=job.protocol,
            problems=job.problems,
            requests=stats.requests,
            cached_requests=stats.cached_requests,
            samples=stats.samples,
            generated_tokens=stats.generated_tokens,
            seconds=stats.seconds,
            host=machine(),
            threads=torch_threads(),
            recorded=now(),
        )
        write_observation(entry, job.cache_dir)


def _pending(job) -> list:
    return [r for r in job.requests if r.key(job.backend.model_revision) not in job.cache]
