"""A ledger of generation timings, and the time estimate a run prints before its first job.

After each generation phase that drew fresh tokens, ``cotdyn.generation.run`` records one observation: the
model, the settings that change its speed, the machine, the work done and the seconds it took. Each
observation is one small JSON file under ``<cache>/timings/observations/`` (two levels down, so
``<cache>/<revision>/*.json`` stays the cache's own shards), named by its content and written
atomically, so parallel jobs and studies sharing a cache never collide.

``estimate`` turns the observations that match a pending phase into a duration, and never invents a
speed: with no matching observation it gives the work bound in tokens instead. Request keys need the
tokenizer, so at the start of a run the cache is judged by the ledger: each observation names its
``work`` (``work``: what shapes the phase's requests) and the cache shards its fresh requests went to;
while those shards exist, that work's requests are in the cache (``coverage``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

from cotdyn.files.writers import write_json
from cotdyn.generation.cache import revision_folder
from cotdyn.plan.config import REFERENCE_FIELDS
from cotdyn.protocol.segment import checkpoints

FORMAT = "cotdyn-timing/1"
OBSERVATIONS = Path("timings") / "observations"
PHASES = ("reference", "continuations")

# The protocol parameters that shape a continuations job's requests beyond its chains (which the
# reference fields shape): how the prefixes are cut, and how many samples of each are drawn and how
# (cotdyn.generation.requests.prefix_plan, continuation_requests, continuation_sampling). The endpoint enters only
# as whether the reasoning cut moves the last prefix.
CONTINUATION_FIELDS = (
    "m",
    "continuation_temperature",
    "continuation_max_tokens",
    "checkpoints",
    "checkpoint_stride",
    "segmentation",
    "cap",
)


# --- what an observation is keyed by -------------------------------------------------------------


def model_identity(model: dict) -> str:
    """The model a config entry names, known before any weights load: a GGUF file of a package (at the
    package's installed version), a hub id at its pinned revision, or a local directory (by its weight
    files' names, sizes and times: a changed file makes it another model)."""
    if model.get("backend") == "simulated":
        return "simulated " + json.dumps(model.get("planted", {}), sort_keys=True)
    gguf = model.get("gguf")
    if gguf:
        return f"gguf {gguf.get('package')}=={_package_version(gguf.get('package'))}/{gguf.get('file')}"
    model_id = str(model.get("id"))
    if model.get("revision"):
        return f"{model_id}@{model['revision']}"
    path = Path(model_id)
    if path.is_dir():
        return f"{model_id} (local {_directory_fingerprint(path)})"
    return f"{model_id} (unpinned)"


def _package_version(package) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(str(package))
    except (PackageNotFoundError, ValueError):
        return "not installed"


def _directory_fingerprint(path: Path) -> str:
    """Names, sizes and modification times of the weight and config files: cheap, unlike hashing
    gigabytes of weights at every start."""
    entries = [
        (f.name, f.stat().st_size, f.stat().st_mtime_ns)
        for f in sorted(path.iterdir())
        if f.is_file() and f.suffix in (".safetensors", ".json", ".bin")
    ]
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:12]


def speed_settings(model: dict) -> dict:
    """The settings of a model entry that change generation speed, with the defaults
    ``cotdyn.generation.backends.make_backend`` applies, so an entry that spells a default out matches one that
    leaves it implicit."""
    backend = model.get("backend")
    settings = {"backend": backend, "chunk_size": model.get("chunk_size", 0)}
    if backend == "transformers":
        settings |= {
            "device": model.get("device", "cpu"),
            "dtype": model.get("dtype", "float32"),
            "batch_size": model.get("batch_size", 16),
            "share_prefill": model.get("share_prefill", True),
            "decode": model.get("decode", "compacting"),
        }
    elif backend == "vllm":
        settings |= {"device": "cuda", "dtype": model.get("dtype", "bfloat16"), "engine": model.get("vllm", {})}
    else:
        settings |= {"device": "cpu"}
    return settings


def machine() -> dict:
    """The hardware generation runs on: CPU model and counts, GPU models (read from the driver's files,
    without starting CUDA, so the start of a run stays quick). Not the host's name: the alike nodes
    of a cluster, or fresh CI machines, share their timings."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_model": _cpu_model(), "cpus": os.cpu_count(), "usable_cpus": usable, "gpus": _gpu_models()}


def _cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu_models(root: Path = Path("/proc/driver/nvidia/gpus")) -> list[str]:
    models = []
    for info in sorted(root.glob("*/information")) if root.is_dir() else []:
        try:
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    models.append(line.split(":", 1)[1].strip())
        except OSError:
            continue
    return models


def torch_threads() -> int | None:
    """Torch's intra-op thread count where this process uses torch (the simulated model does not)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def request_fields(protocol: dict, phase: str) -> dict:
    """The protocol parameters that shape ``phase``'s requests: the reference chain's, and for
    continuations also how prefixes are cut and sampled, and whether the reasoning cut applies."""
    fields = {key: protocol[key] for key in REFERENCE_FIELDS}
    if phase == "continuations":
        fields |= {key: protocol[key] for key in CONTINUATION_FIELDS}
        fields["reasoning_cut"] = protocol["endpoint"] == "reasoning"
    return fields


def budgets(protocol: dict, phase: str) -> dict:
    """What sets how long ``phase``'s generations are: its request fields but the seed, so that
    timings of other seeds tell the length of this one's."""
    return {k: v for k, v in request_fields(protocol, phase).items() if k != "seed"}


def work(
    phase: str,
    model: dict,
    cell: str,
    benchmark: str,
    protocol: dict,
    problems: int | None,
    benchmark_entry: dict | None = None,
) -> str | None:
    """A digest of what decides a phase's requests, from what the start of a run knows: the model, the
    cell (request seeds derive from its name), the benchmark (its answer rule and its entry, see
    ``problem_source``), the problem count and the protocol fields that shape the requests. None when
    the problem count is unknown."""
    if problems is None:
        return None
    identity = {
        "phase": phase,
        "model": model_identity(model),
        "cell": cell,
        "benchmark": benchmark,
        "problem_source": problem_source(benchmark_entry),
        "problems": problems,
        "protocol": request_fields(protocol, phase),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]


def problem_source(entry: dict | None) -> dict | None:
    """A benchmark entry as it decides the problems: its fields (kind, n, seed, hub revision, content
    hash, ...) and, for a file it reads, the file's sha256, so an edited file is other work."""
    if entry is None:
        return None
    source = dict(entry)
    path = Path(str(entry["path"])) if entry.get("path") else None
    if path is not None:
        source["path_sha256"] = _file_sha256(path) if path.is_file() else "missing"
    return source


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- observations ----------------------------------------------------------------------------------


def observation(
    *,
    phase: str,
    model: dict,
    revision: str,
    benchmark: str,
    protocol: dict,
    problems: int,
    requests: int,
    cached_requests: int,
    samples: int,
    generated_tokens: int,
    seconds: float,
    host: dict,
    threads: int | None,
    recorded: str,
    work: str | None = None,
    shards: dict[str, int] | None = None,
) -> dict:
    """One timing observation of a generation phase (``recorded``: its UTC time, ISO 8601; ``work``:
    its ``work`` digest; ``shards``: the cache shard files of its fresh requests, with their counts)."""
    return {
        "format": FORMAT,
        "recorded": recorded,
        "phase": phase,
        "work": work,
        "shards": dict(shards or {}),
        "model": model_identity(model),
        "revision": revision,
        "settings": speed_settings(model),
        "machine": host,
        "torch_threads": threads,
        "benchmark": benchmark,
        "budgets": budgets(protocol, phase),
        "problems": problems,
        "requests": requests,
        "fresh_requests": requests - cached_requests,
        "samples": samples,
        "generated_tokens": generated_tokens,
        "seconds": round(seconds, 3),
    }


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_observation(entry: dict, cache_dir) -> Path:
    """Write one observation under the cache folder, named by its content: two jobs never write the
    same name unless they write the same bytes."""
    digest = hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:20]
    return write_json(entry, Path(cache_dir) / OBSERVATIONS / f"{entry['phase']}-{digest}.json")


_FIELDS = {
    "recorded": str,
    "phase": str,
    "model": str,
    "revision": str,
    "settings": dict,
    "machine": dict,
    "benchmark": str,
    "budgets": dict,
    "problems": int,
    "requests": int,
    "fresh_requests": int,
    "generated_tokens": int,
    "seconds": (int, float),
}


def check_observation(entry) -> str | None:
    """Why ``entry`` is not a usable observation, or None."""
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return f"not a {FORMAT} observation"
    for key, kind in _FIELDS.items():
        value = entry.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"field '{key}' missing or not {getattr(kind, '__name__', 'a number')}"
    if entry["phase"] not in PHASES:
        return f"field 'phase' is '{entry['phase']}' (known: {', '.join(PHASES)})"
    numbers = ("problems", "requests", "fresh_requests", "generated_tokens", "seconds")
    if any(not math.isfinite(entry[k]) or entry[k] < 0 for k in numbers):
        return "a count or the seconds is negative or not finite"
    # work and shards came later: an observation without them covers nothing
    if not isinstance(entry.get("work"), (str, type(None))):
        return "field 'work' not a string"
    shards = entry.get("shards", {})
    if not isinstance(shards, dict) or any(
        not isinstance(n, int) or isinstance(n, bool) or n < 0 or not _shard_name(name) for name, n in shards.items()
    ):
        return "field 'shards' not a mapping of shard file names to request counts"
    return None


def _shard_name(name) -> bool:
    """A shard file name as ``GenerationCache.put`` writes it, never a path out of the cache folder."""
    return isinstance(name, str) and name.endswith(".json") and "/" not in name and "\\" not in name and name != ".json"


def read_observations(directory) -> tuple[list[dict], list[str]]:
    """The observations under ``<directory>/timings/observations`` and one warning per file skipped
    (unreadable, not JSON, or not an observation); a missing folder is no observation."""
    folder = Path(directory) / OBSERVATIONS
    found, warnings = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            warnings.append(f"timings: skipping {path} (unreadable: {type(e).__name__})")
            continue
        problem = check_observation(entry)
        if problem:
            warnings.append(f"timings: skipping {path} ({problem})")
        else:
            found.append(entry)
    return found, warnings


# --- the estimate ----------------------------------------------------------------------------------


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
    were already full (the transformers backend's batch size) or the backend does not batch."""
    settings = speed_settings(phase.model)
    most = max(e["problems"] for e in timed)
    if settings["backend"] not in ("transformers", "vllm") or phase.problems is None:
        return ""
    if most >= phase.problems * share:
        return ""
    if settings["backend"] == "transformers" and max(e.get("samples", 0) for e in timed) >= settings["batch_size"]:
        return ""
    return f"; that rate was timed on at most {most} problems, and it depends on how full the batches are"


# --- a first timing, where the ledger has none ----------------------------------------------------

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
