"""The timing ledger watching a generation phase from outside: ``cotdyn.generation.run`` calls
``before(job)`` once the phase's requests are known, ``first_chunk(job, rows, pending_rows, seconds)``
once its first chunk of fresh rows is generated, and ``after(job, stats)`` once its outputs are
written, and knows nothing else of timings.

``job`` is a ``cotdyn.generation.run.GenerationJob`` (its phase, cell, model, benchmark, protocol as
drawn, problem count, cache folder, backend, cache, requests and progress label); ``stats`` the
cache's ``GenerationStats`` of the phase.
"""

from __future__ import annotations

from cotdyn.generation.backends import registry
from cotdyn.generation.timings.estimates import Phase, continuation_forecast, estimate
from cotdyn.generation.timings.first_chunk import first_chunk_text
from cotdyn.generation.timings.identity import machine, torch_threads, work
from cotdyn.generation.timings.ledger import now, observation, read_observations, write_observation


class TimingObserver:
    """Before a phase, its expected time: continuations print their forecast from the ledger; a phase
    the ledger has no timing of is forecast once its first chunk is done, from that chunk's rate
    (``first_chunk``). After it, its observation in the ledger under the job's cache folder, when it
    generated fresh tokens.

    ``benchmark_entry``: the cell's benchmark entry, which names the work in the ledger."""

    def __init__(self, benchmark_entry: dict | None = None):
        self.benchmark_entry = benchmark_entry
        self._untimed: set[str] = set()  # the labels of phases the ledger has no timing of

    def before(self, job) -> None:
        if job.phase == "reference":
            ledger, _ = read_observations(job.cache_dir)
            phase = Phase("reference", job.cell, job.model, job.benchmark, job.protocol, job.problems, torch_threads())
            if estimate(phase, ledger, machine()).kind == "unknown":
                self._untimed.add(job.label)
        else:
            self._forecast(job)

    def first_chunk(self, job, rows: int, pending_rows: int, seconds: float) -> None:
        """The phase's first chunk drew ``rows`` of its ``pending_rows`` in ``seconds``: where the ledger
        had no timing and more chunks follow, print the rest of the phase at that rate. Not for a
        backend that takes no time (its declaration's ``first_chunk_forecast``: the simulated one)."""
        declared = registry.REGISTRY.get(getattr(job.backend, "name", None))
        if job.label not in self._untimed or rows >= pending_rows or not (declared and declared.first_chunk_forecast):
            return
        _, line = first_chunk_text(seconds, rows, pending_rows)
        print(f"{job.label}: {line}", flush=True)

    def _forecast(self, job) -> None:
        """Print the continuations' expected time now that their requests are known, from the ledger,
        else say the first chunk will tell it."""
        keys = {r.key(job.backend.model_revision) for r in job.requests}
        cached = sum(1 for k in keys if k in job.cache)
        observations, warnings = read_observations(job.cache_dir)
        phase = Phase("continuations", job.cell, job.model, job.benchmark, job.protocol, None, torch_threads())
        seconds, line = continuation_forecast(phase, len(keys), cached, observations, machine())
        print("\n".join(warnings + [f"{job.cell} continuations: {line}"]), flush=True)
        if seconds is None:
            self._untimed.add(job.label)

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
