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
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from cotdyn.generation import requests as P
from cotdyn.generation.backends.base import Request, request_keys
from cotdyn.generation.cache import revision_folder
from cotdyn.protocol.prompts import prefix_ids
from cotdyn.protocol.seeds import request_seed
from cotdyn.provenance import seal as S


def int_ids(ids) -> tuple[int, ...]:
    return tuple(np.asarray(ids, dtype=np.int64).tolist())


def chains_requests(chains: pd.DataFrame, protocol: dict, cell: str) -> list[Request]:
    """One reference request per chain, as ``requests.reference_requests`` built it."""
    sampling = P.reference_sampling(protocol)
    return [
        Request(
            int_ids(c.prompt_ids),
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
    return list(each_samples_request(samples, chains, protocol, cell))


def each_samples_request(samples: pd.DataFrame, chains: pd.DataFrame, protocol: dict, cell: str) -> Iterator[Request]:
    """``samples_requests`` one at a time, for a reader that need not hold them together (the
    audit: a panel cell's requests, their prompt ids with them, came to some 40 MB)."""
    sampling = P.continuation_sampling(protocol)
    ids = {c.problem_id: (int_ids(c.prompt_ids), int_ids(c.token_ids)) for c in chains.itertuples()}
    keys = list(zip(samples["problem_id"].tolist(), samples["prefix_tokens"].tolist()))
    index = samples["sample"].tolist()  # read once: a value looked up per row costs more than the rest
    start = 0
    for i in range(1, len(keys) + 1):
        if i < len(keys) and keys[i] == keys[start] and int(index[i]) == i - start:
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
        yield Request(prompt_ids, i - start, sampling, seed)
        start = i


def sealed_requests(requests: list[Request], revision: str) -> list[tuple[str, int]]:
    return list(zip(request_keys(requests, revision), (r.n for r in requests)))


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


def seal_differences(raw_path, seal: dict, read_back: Callable[[str], list[tuple[str, int]]],
                     digest: str | None = None) -> list[str]:  # fmt: skip
    """How one raw file differs from its ``seal`` (``provenance.seal.read_seal``): its hash, and the
    requests read back from its rows (``read_back``: their (key, n) under a model revision,
    ``sealed_requests``). ``digest``: the file's sha256, where the caller has it."""
    problems = []
    if (digest or S.file_sha256(raw_path)) != seal["sha256"]:
        problems.append(f"sha256 differs from its seal {S.seal_path(raw_path).name}")
    recomputed = [list(k) for k in read_back(seal["model_revision"])]
    if recomputed != seal["requests"]:
        differ = sum(a != b for a, b in zip(recomputed, seal["requests"])) + abs(
            len(recomputed) - len(seal["requests"])
        )
        problems.append(f"{differ} of its requests (prompt ids, seeds, prefixes) differ from those sealed")
    return problems


def cache_folder(cache_dir, seal: dict) -> tuple[Path | None, str | None]:
    """The cache folder a seal's rows are compared with, or (None, why not: None when the cache or
    its folder is simply not there)."""
    if cache_dir is None:
        return None, None
    folder = revision_folder(cache_dir, str(seal.get("model_revision")))
    if not folder.resolve().is_relative_to(Path(cache_dir).resolve()) or folder.resolve() == Path(cache_dir).resolve():
        return None, f"its seal's model_revision {seal.get('model_revision')!r} names no folder of the cache"
    return (folder, None) if folder.is_dir() else (None, None)
