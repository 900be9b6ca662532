"""A ledger of generation timings, and the time estimate a run prints before its first job.

After each generation phase that drew fresh tokens, the ``TimingObserver`` a workflow job hands to
``cotdyn.generation.run`` records one observation: the model, the settings that change its speed,
the machine, the work done and the seconds it took. Each observation is one small JSON file under
``<cache>/timings/observations/`` (two levels down, so ``<cache>/<revision>/*.json`` stays the
cache's own shards), named by its content and written atomically, so parallel jobs and studies
sharing a cache never collide.

``estimate`` turns the observations that match a pending phase into a duration, and never invents a
speed: with no matching observation it gives the work bound in tokens instead. Request keys need the
tokenizer, so at the start of a run the cache is judged by the ledger: each observation names its
``work`` (``work``: what shapes the phase's requests) and the cache shards its fresh requests went to;
while those shards exist, that work's requests are in the cache (``coverage``).

The package: ``identity`` (what an observation is keyed by: model, speed settings, machine, work),
``ledger`` (observations: their fields, writing and reading them), ``estimates`` (a phase's expected
time from the ledger), ``first_chunk`` (a first timing where the ledger has none: the rest of the
phase at its first chunk's rate), ``observer`` (the observer the workflow passes to
``cotdyn.generation.run``: the estimate before a phase, the first chunk's forecast during it, its
observation after it). Every public name is importable from here.
"""

from cotdyn.generation.timings.estimates import (
    NO_TIMING,
    Coverage,
    Estimate,
    Phase,
    continuation_forecast,
    coverage,
    duration,
    estimate,
    per_second,
    rate,
    same_setup,
    token_bound,
    tokens_per_problem,
)
from cotdyn.generation.timings.first_chunk import first_chunk_text
from cotdyn.generation.timings.identity import (
    CONTINUATION_FIELDS,
    _cpu_model,
    budgets,
    machine,
    model_identity,
    problem_source,
    request_fields,
    speed_settings,
    torch_threads,
    work,
)
from cotdyn.generation.timings.ledger import (
    FORMAT,
    OBSERVATIONS,
    PHASES,
    check_observation,
    now,
    observation,
    read_observations,
    write_observation,
)
from cotdyn.generation.timings.observer import TimingObserver

__all__ = [
    "CONTINUATION_FIELDS",
    "Coverage",
    "Estimate",
    "FORMAT",
    "NO_TIMING",
    "OBSERVATIONS",
    "PHASES",
    "Phase",
    "TimingObserver",
    "_cpu_model",
    "budgets",
    "check_observation",
    "continuation_forecast",
    "coverage",
    "duration",
    "estimate",
    "first_chunk_text",
    "machine",
    "model_identity",
    "now",
    "observation",
    "per_second",
    "problem_source",
    "rate",
    "read_observations",
    "request_fields",
    "same_setup",
    "speed_settings",
    "token_bound",
    "tokens_per_problem",
    "torch_threads",
    "work",
    "write_observation",
]
