"""What the generation cache keeps, which study references each shard, and what no study does
(``cotdyn cache ls|prune``; docs/reference.md section 8).

A shard (``<cache>/<model revision>/<sha256>.json``, cotdyn.generation.cache) holds the completions
of one chunk of requests, by cache key. A study references a key when one of its seals lists it
(``cells/**/seal.json``: every request behind a sealed chains or samples file, with its model
revision), so a shard is referenced when any of its keys is. Pruning removes whole shards none of
whose keys any study references; a shard some study still reads is kept whole.

What pruning never touches: a cache that holds a run's unfinished work (journals,
temporaries: a run in flight, or one killed that a resume will finish), shards younger than a
minimum age (a phase whose chunks are written but not yet sealed references nothing yet), and
anything that is not a regular file. Links are never
followed, inside the cache or inside a study: a link is listed, never read through or removed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from cotdyn.files.strict import UntrustedFileError, read_json
from cotdyn.generation import journal as J
from cotdyn.generation.cache import SHARD_DAMAGE, shard_body
from cotdyn.provenance.seal import MAX_SEAL_BYTES, SEAL, requests_sha256

UNFINISHED = (J.SUFFIX, ".tmp")  # a run's work not yet in a shard


class CacheError(ValueError):
    """A user error of ``cotdyn cache``: one line naming the path and why."""


@dataclass(frozen=True)
class Shard:
    path: Path  # relative to the cache
    size: int
    mtime: float
    keys: frozenset[str]
    damaged: str | None = None  # why it cannot be read (the cache ignores it, and so serves nothing from it)


@dataclass
class Inventory:
    shards: list[Shard] = field(default_factory=list)
    unfinished: list[Path] = field(default_factory=list)  # journals, temporaries
    links: list[Path] = field(default_factory=list)  # never followed, never removed
    other: list[Path] = field(default_factory=list)  # the ledger and anything unknown: kept


def _shard(cache: Path, path: Path) -> Shard:
    """One shard with its cache keys, read as the cache reads it (``cache.shard_body``)."""
    info = path.lstat()
    try:
        keys, damaged = frozenset(shard_body(path)), None
    except SHARD_DAMAGE as e:
        keys, damaged = frozenset(), str(e).splitlines()[0][:200]
    return Shard(path.relative_to(cache), info.st_size, info.st_mtime, keys, damaged)


def inventory(cache_dir: str | Path) -> Inventory:
    """Every entry of the cache, two levels deep (revision folders, then their files), by kind."""
    cache = Path(cache_dir)
    if not cache.is_dir():
        raise CacheError(f"{cache}: no generation cache there (not a folder)")
    found = Inventory()
    for top in sorted(cache.iterdir()):
        rel = top.relative_to(cache)
        if top.is_symlink():
            found.links.append(rel)
        elif not top.is_dir():
            found.other.append(rel)
        else:
            for entry in sorted(top.iterdir()):
                _classify(cache, entry, found)
    return found


def _classify(cache: Path, entry: Path, found: Inventory) -> None:
    rel = entry.relative_to(cache)
    if entry.is_symlink():
        found.links.append(rel)
    elif entry.name.endswith(UNFINISHED):
        found.unfinished.append(rel)
    elif entry.is_file() and entry.suffix == ".json":
        found.shards.append(_shard(cache, entry))
    else:
        found.other.append(rel)


# --- studies ---------------------------------------------------------------------------------


def study_folders(paths: list[str | Path]) -> list[Path]:
    """Each path that is a study (it holds ``cells/``), or else the studies directly inside it."""
    studies = []
    for path in map(Path, paths):
        if path.is_symlink() or not path.is_dir():
            raise CacheError(f"{path}: not a study folder nor a folder of studies (a link is not followed)")
        if (path / "cells").is_dir():
            studies.append(path)
        else:
            studies += [p for p in sorted(path.iterdir()) if not p.is_symlink() and (p / "cells").is_dir()]
    return studies


def _seals(study: Path) -> list[Path]:
    seals = []
    for folder, dirs, files in os.walk(study / "cells"):  # followlinks=False: a linked folder is not entered
        seals += [Path(folder) / SEAL for name in files if name == SEAL]
    return sorted(seals)


def study_keys(study: Path) -> set[str]:
    """Every cache key the study's seals list; CacheError naming a seal that cannot be read (what
    it references would be unknown, so nothing may be pruned on its account)."""
    keys: set[str] = set()
    for seal in _seals(study):
        try:
            if seal.is_symlink():
                raise ValueError("a link, not followed")
            content = read_json(seal, max_bytes=MAX_SEAL_BYTES)
            requests = content["requests"]
            if requests_sha256(requests) != content.get("requests_sha256"):
                raise ValueError("its requests do not hash to its requests_sha256")
            keys |= {str(key) for key, _ in requests}
        except (UntrustedFileError, ValueError, KeyError, TypeError) as e:
            raise CacheError(f"{seal}: unreadable seal ({str(e).splitlines()[0][:200]})") from None
    return keys


def references(shards: list[Shard], studies: list[Path]) -> dict[Path, list[Path]]:
    """Each shard -> the studies that reference one of its keys."""
    by_study = {study: study_keys(study) for study in studies}
    return {s.path: [st for st, keys in by_study.items() if s.keys & keys] for s in shards}


# --- pruning ---------------------------------------------------------------------------------


def prunable(found: Inventory, refs: dict[Path, list[Path]], min_age_s: float, now: float | None = None):
    """(the shards pruning removes, why others no study references are kept). A revision folder
    holding unfinished work keeps every shard: that run's sealed files do not exist yet."""
    now = time.time() if now is None else now
    busy = {p.parent for p in found.unfinished}
    remove, kept = [], []
    for shard in found.shards:
        if refs.get(shard.path):
            continue
        if shard.path.parent in busy:
            kept.append((shard, "its folder holds a run's unfinished work (resume or finish that run first)"))
        elif now - shard.mtime < min_age_s:
            kept.append((shard, "younger than the minimum age (a run may not have sealed it yet)"))
        else:
            remove.append(shard)
    return remove, kept


def remove_shard(cache_dir: str | Path, shard: Shard) -> None:
    """Remove one shard: a regular file directly in a revision folder of this cache, never a link."""
    cache = Path(cache_dir)
    path = cache / shard.path
    if path.is_symlink() or path.parent.is_symlink() or path.parent.parent != cache or not path.is_file():
        raise CacheError(f"{path}: no longer a shard of {cache}; left alone")
    path.unlink()
