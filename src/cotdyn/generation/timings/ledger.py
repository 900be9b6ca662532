"""The timing ledger's observations: one small JSON file each under ``<cache>/timings/observations/``,
named by its content; their fields, and reading them back with a warning per file skipped."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime, timezone
from pathlib import Path

from cotdyn.files.strict import read_json
from cotdyn.files.writers import write_json
from cotdyn.generation.timings.identity import budgets, model_identity, speed_settings

FORMAT = "cotdyn-timing/1"
OBSERVATIONS = Path("timings") / "observations"
PHASES = ("reference", "continuations")
MAX_OBSERVATION_BYTES = 1 << 20  # one observation: a few hundred bytes


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
            # strictly (cotdyn.files.strict): the cache may be a study's; a FIFO, a giant or a key
            # written twice is skipped by name like a torn file
            entry = read_json(path, max_bytes=MAX_OBSERVATION_BYTES)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            warnings.append(f"timings: skipping {path} (unreadable: {type(e).__name__})")
            continue
        problem = check_observation(entry)
        if problem:
            warnings.append(f"timings: skipping {path} ({problem})")
        else:
            found.append(entry)
    return found, warnings
