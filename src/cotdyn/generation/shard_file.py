"""One shard of the generation cache read back (cotdyn.generation.cache), with nothing but the
standard library: the audit's second process reads shards so (cotdyn.audit.cache_rows) without
loading the generation code's pandas and numpy."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from cotdyn.files.strict import parse_json, read_text

# A shard holds one chunk of a run's results; with chunk_size 0 a whole cell's samples (token ids and
# texts): some hundreds of MB for the largest studies. Beyond this it is refused, not read into memory.
MAX_SHARD_BYTES = 2 << 30


def shards(directory: Path) -> list[Path]:
    """A cache folder's shards, in the order they are loaded."""
    return sorted(Path(directory).glob("*.json"))


def shard_samples(shard: Path) -> dict[str, list[tuple[tuple, object, object]]] | str:
    """One shard's samples by key, each (token ids, text, finish reason) as written, or why it is
    ignored (a torn write or tampering: its requests are generated again, never trusted)."""
    try:
        if shard.is_symlink():  # a shard is a file the cache wrote, never a link elsewhere
            raise ValueError("a symlink, not a shard")
        # strictly (cotdyn.files.strict): a regular file, bounded, no key twice, nested as a
        # shard nests; a refusal is a ValueError naming the shard, so it is ignored like a torn one
        payload = parse_json(read_text(shard, max_bytes=MAX_SHARD_BYTES), shard)
        body = payload["body"]
        if hashlib.sha256(body.encode()).hexdigest() != payload["sha256"]:
            raise ValueError("checksum mismatch")
        return {
            key: [(tuple(ids), text, reason) for ids, text, reason in samples]
            for key, samples in parse_json(body, shard).items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"generation cache: ignoring damaged shard {shard} ({e})", file=sys.stderr)
        return f"{shard.name}: {e}"
