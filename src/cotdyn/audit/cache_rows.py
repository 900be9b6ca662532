"""The generation cache as the audit compares it with the raw files (cotdyn.audit.raw): each row a
digest of its token ids and text, beside its finish reason, so that a model's shards are held as
digests, not as their texts."""

from __future__ import annotations

import hashlib
from array import array
from pathlib import Path
from typing import Collection

from cotdyn.generation.cache import shard_samples, shards


def content_digest(ids: bytes, text) -> bytes:
    """A row's token ids (as int64 bytes) and text as one digest: the audit holds a model's rows so
    while it reads its cache, not their ids and texts (a panel model's came to some 100 MB).
    Injective in both: the ids' length leads, and a text that is no string is marked with a byte
    UTF-8 never holds."""
    written = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else b"\xff" + repr(text).encode()
    return hashlib.blake2b(len(ids).to_bytes(8, "little") + ids + written, digest_size=16).digest()


def completion_ids(token_ids) -> bytes:
    """A cached completion's token ids as int64 bytes; TypeError where one is no integer (a float,
    a string: the cache writes integers) and ValueError where one is out of range."""
    try:
        return array("q", token_ids).tobytes()
    except OverflowError as e:
        raise ValueError(f"a token id out of range: {e}") from None


def cached_row(token_ids, text, finish_reason) -> tuple[bytes | Exception, object]:
    """A cached completion as (its ``content_digest``, finish reason); where its ids are no int64
    integers, the error that makes a raw file compared with it unreadable stands for the digest."""
    try:
        return content_digest(completion_ids(token_ids), text), finish_reason
    except (TypeError, ValueError) as e:
        return e, finish_reason


def folder_rows(folder: Path, keys: Collection[str]) -> dict[str, list[tuple[bytes | Exception, object]]]:
    """The cached rows of ``keys`` in one cache folder, each key's from the last shard, in load order,
    that holds it (as a cache loaded whole holds it), read a shard at a time; a damaged shard is
    ignored (``cotdyn.generation.cache.shard_samples``)."""
    wanted, rows = set(keys), {}
    for shard in shards(folder):
        samples = shard_samples(shard)
        if isinstance(samples, str):
            continue
        for key in wanted & samples.keys():
            rows[key] = [cached_row(*sample) for sample in samples[key]]
    return rows
