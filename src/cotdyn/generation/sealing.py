"""The requests behind a raw table, read back from the table itself, and its rows against the cache.

A chains table holds each chain's prompt ids, and a samples table each continuation's prefix
length and seed, so the requests that produced them (``cotdyn.generation.requests``) and their
content addresses follow from the table, the protocol and the cell. Generation seals the file
with them (``cotdyn.provenance.seal``); the audit recomputes them from the file it finds, checks
them against the seal, and compares every row with the cache entry under its key.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from cotdyn.generation import requests as P
from cotdyn.generation.backends.base import Request
from cotdyn.generation.cache import GenerationCache, revision_folder
from cotdyn.protocol.prompts import prefix_ids
from cotdyn.protocol.seeds import request_seed
from cotdyn.provenance import seal as S


def _ints(ids) -> tuple[int, ...]:
    return tuple(np.asarray(ids, dtype=np.int64).tolist())


def chains_requests(chains: pd.DataFrame, protocol: dict, cell: str) -> list[Request]:
    """One reference request per chain, as ``requests.reference_requests`` built it."""
    sampling = P.reference_sampling(protocol)
    return [
        Request(
            _ints(c.prompt_ids),
            1,
            sampling,
            request_seed(protocol["seed"], cell, c.problem_id, 0, "reference", protocol.get("time_lock")),
            role="reference",
        )
        for c in chains.itertuples()
    ]


def samples_requests(samples: pd.DataFrame, chains: pd.DataFrame, protocol: dict, cell: str) -> list[Request]:
    """One continuation request per run of rows sharing (problem, prefix), its n the run's length,
    as ``requests.continuation_requests`` built them. ValueError naming the row where a prefix or
    a problem does not fit the chains."""
    sampling = P.continuation_sampling(protocol)
    ids = {c.problem_id: (_ints(c.prompt_ids), _ints(c.token_ids)) for c in chains.itertuples()}
    keys = list(zip(samples["problem_id"], samples["prefix_tokens"]))
    requests, start = [], 0
    for i in range(1, len(keys) + 1):
        if i < len(keys) and keys[i] == keys[start] and int(samples["sample"].iat[i]) == i - start:
            continue
        problem, tokens = keys[start]
        if problem not in ids:
            raise ValueError(f"row {start}: problem '{problem}' has no chain")
        prompt, chain = ids[problem]
        try:
            prompt_ids = prefix_ids(prompt, chain, int(tokens))
        except ValueError as e:
            raise ValueError(f"row {start}: {e}") from None
        seed = request_seed(protocol["seed"], cell, problem, int(tokens), "continuation", protocol.get("time_lock"))
        requests.append(Request(prompt_ids, i - start, sampling, seed))
        start = i
    return requests


def sealed_requests(requests: list[Request], revision: str) -> list[tuple[str, int]]:
    return [(r.key(revision), r.n) for r in requests]


def model_revision(generation_log) -> str:
    """The revision the backend reported in a phase's generation.json (the first part of every key)."""
    return json.loads(Path(generation_log).read_text())["backend"]["revision"]


def seal_chains(chains_path, generation_log, protocol: dict, cell: str, staged: bool = False) -> dict | None:
    """Seal a chains file ``run_reference`` wrote. ``staged``: it wrote the file and its log under
    their ``unsealed_path`` names, placed now with the seal, first writer wins (``write_seal``)."""
    written, log = _staged(chains_path, generation_log, staged)
    revision = model_revision(log)
    requests = chains_requests(pd.read_parquet(written or chains_path), protocol, cell)
    return S.write_seal(chains_path, revision, sealed_requests(requests, revision), written, {generation_log: log})


def seal_samples(samples_path, chains_path, generation_log, protocol: dict, cell: str, staged: bool = False):
    """Seal a samples file ``run_continuations`` wrote; ``staged`` as in ``seal_chains``."""
    written, log = _staged(samples_path, generation_log, staged)
    revision = model_revision(log)
    samples, chains = pd.read_parquet(written or samples_path), pd.read_parquet(chains_path)
    requests = samples_requests(samples, chains, protocol, cell)
    return S.write_seal(samples_path, revision, sealed_requests(requests, revision), written, {generation_log: log})


def _staged(raw_path, generation_log, staged: bool) -> tuple:
    if not staged:
        return None, generation_log
    return S.unsealed_path(raw_path), S.unsealed_path(generation_log)


def cache_differences(table: pd.DataFrame, sealed: list[list], cache: GenerationCache, limit: int = 3) -> list[str]:
    """How the rows of a raw table differ from the cache's completions under the sealed keys, in
    row order (each request's n rows in turn): the count of rows that differ and the first few."""
    rows = table[["token_ids", "text", "finish_reason"]].itertuples(index=False)
    found, missing, total = [], 0, sum(n for _, n in sealed)
    if len(table) != total:
        return [f"{len(table)} rows, the seal's requests hold {total}"]
    for key, n in sealed:
        stored = [next(rows) for _ in range(n)]
        if key not in cache:
            missing += n
            continue
        completions = cache.get(key)
        for j, row in enumerate(stored):
            c = completions[j] if j < len(completions) else None
            if c is None or _ints(row.token_ids) != tuple(c.token_ids) or row.text != c.text:
                found.append(f"request {key[:12]} sample {j}: text or token ids differ from the cache")
            elif row.finish_reason != c.finish_reason:
                found.append(f"request {key[:12]} sample {j}: finish_reason differs from the cache")
    lines = [f"{missing} rows' requests are not in the cache"] if missing else []
    if found:
        lines.append(f"{len(found)} rows differ from the cache: " + "; ".join(found[:limit]))
    return lines


def check_against_cache(
    raw_path, requests: list[Request], cache_dir, opened: dict | None = None
) -> tuple[list[str], bool]:
    """Problems of one raw file against its seal and the cache (empty when it matches both), and
    whether the cache was there to compare with. ``opened``: cache folders already loaded, by path."""
    try:
        seal = S.read_seal(raw_path)
    except S.SealError as e:
        return [str(e)], False
    problems = []
    if S.file_sha256(raw_path) != seal["sha256"]:
        problems.append(f"sha256 differs from its seal {S.seal_path(raw_path).name}")
    recomputed = [list(k) for k in sealed_requests(requests, seal["model_revision"])]
    if recomputed != seal["requests"]:
        differ = sum(a != b for a, b in zip(recomputed, seal["requests"])) + abs(
            len(recomputed) - len(seal["requests"])
        )
        problems.append(f"{differ} of its requests (prompt ids, seeds, prefixes) differ from those sealed")
    if cache_dir is None:
        return problems, False
    folder = revision_folder(cache_dir, str(seal.get("model_revision")))
    if not folder.resolve().is_relative_to(Path(cache_dir).resolve()) or folder.resolve() == Path(cache_dir).resolve():
        return problems + [
            f"its seal's model_revision {seal.get('model_revision')!r} names no folder of the cache"
        ], False
    if not folder.is_dir():
        return problems, False
    opened = {} if opened is None else opened
    if folder not in opened:  # read-only: the audit neither cleans up nor writes a cache it is handed
        opened[folder] = GenerationCache(folder, read_only=True)
    problems += cache_differences(pd.read_parquet(raw_path), seal["requests"], opened[folder])
    return problems, True
