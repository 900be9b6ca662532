"""A cache folder's rows as the audit compares them with the raw files (cotdyn.audit.cache_rows)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cotdyn.audit.cache_rows import cached_row, folder_rows
from cotdyn.generation.backends.base import Completion
from cotdyn.generation.cache import GenerationCache


def a_cache(folder: Path) -> list[str]:
    """A cache folder of three shards, one key in two of them, and two damaged shards: one torn, one
    whose checksummed body is no object of keys."""
    cache = GenerationCache(folder)
    cache.put({"a": [Completion((1, 2), "one", "stop")], "b": [Completion((3,), "two", "length")]})
    cache.put({"b": [Completion((4, 5), "two again", "stop"), Completion((6,), "ü", "stop")]})
    cache.put({"c": [Completion((1.5, 2), "float ids", "stop")]})
    (folder / ("0" * 64 + ".json")).write_text('{"sha256": "0", "bo')
    body = json.dumps([["a", 1]])
    (folder / ("f" * 64 + ".json")).write_text(
        json.dumps({"sha256": hashlib.sha256(body.encode()).hexdigest(), "body": body})
    )
    return ["a", "b", "c"]


def test_a_cache_folder_is_read_as_the_cache_loaded_whole_holds_it(tmp_path):
    keys = a_cache(tmp_path)
    whole = GenerationCache(tmp_path, read_only=True)
    assert len(whole.rejected) == 2, whole.rejected  # the torn shard and the list body, named, not a crash
    expected = {k: [cached_row(c.token_ids, c.text, c.finish_reason) for c in whole.get(k)] for k in keys[:2]}
    assert folder_rows(tmp_path, keys[:2]) == expected  # the last shard holding a key gives its rows
    ((error, reason),) = folder_rows(tmp_path, ["c"])["c"]
    assert isinstance(error, TypeError) and reason == "stop"  # ids that are no integers: an error, never equal
    assert folder_rows(tmp_path, ["zz"]) == {}
