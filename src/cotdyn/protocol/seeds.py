"""Per-request sampler seeds (docs/reference.md section 4: seeds reach the sampler).

A request's seed is a hash of (run seed, cell, problem id, prefix position, role) and, from plan v4 on,
the registration's lock (``cotdyn.plan.timelock``: the plan's sha256 and its timestamp token's), so
no seed exists before the plan it is analysed under was fixed. Sample j of a
request uses seed + j, as vLLM does for n > 1, so base seeds are multiples of 2**SAMPLE_BITS:
two requests' sample ranges never overlap unless their 54-bit hashes collide.

A sampler that honours fewer seeds (llama.cpp's: 32 bits, less its "random seed" value) is sent each
sample's seed reduced into its range (``served_seed``), and that reduced seed is the one recorded.
"""

from __future__ import annotations

import hashlib
import json

SAMPLE_BITS = 8  # up to 256 samples per request
MAX_SAMPLES = 1 << SAMPLE_BITS


def request_seed(run_seed: int, cell: str, problem_id: str, prefix: int, role: str, lock: str | None = None) -> int:
    """Seed of one request; ``prefix`` is the prefix's token count (the same prefix gets the
    same seed under every segmentation rule, so variants share its samples). ``lock``: the
    protocol's ``time_lock`` (plan v4 on); None keeps v1-v3's key, byte for byte."""
    parts = [int(run_seed), cell, str(problem_id), int(prefix), role]
    key = json.dumps(parts if lock is None else [*parts, str(lock)])
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return (digest >> (64 - 54)) << SAMPLE_BITS


def sample_seed(base: int, j: int) -> int:
    if not 0 <= j < MAX_SAMPLES:
        raise ValueError(f"sample index {j} outside 0..{MAX_SAMPLES - 1}")
    return base + j


def served_seed(seed: int, honoured: int | None) -> int:
    """The seed a sampler honouring only the seeds 0 .. honoured - 1 is sent for ``seed`` (None:
    every seed cotdyn draws, which is sent as it is): ``seed mod honoured``. A request's samples
    have consecutive seeds, so they stay distinct; with honoured = 2**32 - 1 the residue folds
    every 32-bit part of the seed together (2**32 = 1 mod 2**32 - 1), so all 62 bits count."""
    if honoured is None:
        return seed
    if honoured <= MAX_SAMPLES:
        raise ValueError(f"a sampler honouring {honoured} seeds cannot tell a request's {MAX_SAMPLES} samples apart")
    return seed % honoured
