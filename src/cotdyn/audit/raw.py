"""The audit of the raw data (docs/reference.md section 7): chains and samples against their seals and the cache.

The study manifest's hash of a samples file shows only that the file has not changed since the
manifest was written; a rerun over a forged file, or a forger who re-hashes, would pass it. So the
audit reads the requests back from each raw file (``cotdyn.generation.sealing``), checks them
against the seal generation wrote, and compares every row's text, token ids and finish reason with
the completion the generation cache holds under its key. Without the cache (a study folder sent
alone) only the seal is checked, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from cotdyn.audit.cache_rows import content_digest, folder_rows
from cotdyn.audit.registration import seed_check, seeds_checked, seeds_unchecked
from cotdyn.audit.view import StudyView
from cotdyn.files.layout import reference_file, variant_file
from cotdyn.files.terminal import printable
from cotdyn.generation.backends.base import Request, request_keys
from cotdyn.generation.sealing import cache_folder, chains_requests, each_samples_request, seal_differences
from cotdyn.plan.config import reference_id, samples_variant
from cotdyn.provenance.integrity import MATCH, MISMATCH, FileCheck
from cotdyn.provenance.seal import SealError


def raw_files(config: dict, protocols: dict[str, dict], cells) -> dict[str, tuple[str, str, str | None]]:
    """Each raw file of the study (relative path) -> (cell, its generating variant, the chains file
    a samples file continues, None for a chains file)."""
    raw = {}
    for name in cells:
        for variant, protocol in protocols.items():
            chains = reference_file(name, reference_id(protocol), "chains.parquet")
            raw.setdefault(chains, (name, variant, None))
            if samples_variant(config, variant) == variant:
                raw[variant_file(name, variant, "samples.parquet")] = (name, variant, chains)
    return raw


@dataclass
class Pending:
    """A raw file sealed as generation wrote it, waiting for its cache folder to be read: its rows,
    its seal's requests (key, n), what the seal check found, and each request's comparison with the
    last shard (in load order) holding its key, as a cache loaded whole would hold it."""

    folder: Path
    rows: list  # (content_digest of token_ids and text, finish_reason) per row
    sealed: list
    starts: list[int]  # each request's first row
    index: dict[str, list[int]]  # each key's requests
    problems: list[str]
    compared: dict[int, list[str]] = field(default_factory=dict)
    error: Exception | None = None


@dataclass(frozen=True)
class ReadBack:
    """A raw file's requests read back from its rows, reduced to what the checks compare: each one's
    (seed, n), and its (key, n) under the seal's model revision (None where the seal was unread)."""

    revision: str | None
    seeds: list[tuple[int, int]]
    sealed: list[tuple[str, int]] | None


def read_back(requests: Iterable[Request], revision: str | None) -> ReadBack:
    """One pass over ``requests``, generated as they are read back and never held together."""
    seeds: list[tuple[int, int]] = []

    def noted():
        for r in requests:
            seeds.append((r.seed, r.n))
            yield r

    if revision is None:
        for _ in noted():
            pass
        return ReadBack(None, seeds, None)
    keys = request_keys(noted(), revision)
    return ReadBack(revision, seeds, list(zip(keys, (n for _, n in seeds))))


def seal_revision(view: StudyView, path: str) -> str | None:
    """The model revision a raw file's seal names, or None where it has no readable seal (its raw
    check names why)."""
    try:
        return view.seal(path)["model_revision"]
    except (SealError, KeyError, TypeError):
        return None


def seeds_of(view: StudyView, path: str, cell: str, protocol: dict, chains: str, honoured: dict | None,
             seeds: dict) -> tuple | None:  # fmt: skip
    """The seed check of a samples file (``registration.seed_check``) into ``seeds``, and the (table,
    ``ReadBack``) it read, for its seal and cache check; None where they could not be read."""
    try:
        table = view.table(path, ids=False)  # its ids are digested a batch at a time (raw_check)
        requests = each_samples_request(table, view.table(chains), protocol, cell)
        found = read_back(requests, seal_revision(view, path))
    except (OSError, ValueError, KeyError, TypeError) as e:
        seeds[path] = (0, seeds_unchecked(path, e))
        return None
    try:
        seeds[path] = seed_check(path, table["seed"], found.seeds, (honoured or {}).get(cell))
    except (ValueError, KeyError, TypeError) as e:  # a seed that is no integer
        seeds[path] = (0, seeds_unchecked(path, e))
    return table, found


def raw_check(view: StudyView, path: str, cell: str, protocol: dict, chains: str | None, cache_dir,
              read: tuple | None = None):  # fmt: skip
    """(whether one raw file matches its seal, what was found) when that is all there is to say
    (the cache absent: None when nothing failed), else a ``Pending`` comparison with the cache.
    Its sha256 is the one the view hashed; ``read``: its table and ``ReadBack`` where the seed check
    read them."""
    try:
        # a chains file's requests hold its prompt ids; a samples file's token ids are digested a batch at a time
        table, found = read if read is not None else (view.table(path, ids=chains is None), None)

        def sealed_under(revision: str) -> list[tuple[str, int]]:
            if found is not None and found.revision == revision:
                return found.sealed
            if chains is None:
                return read_back(chains_requests(table, protocol, cell), revision).sealed
            return read_back(each_samples_request(table, view.table(chains), protocol, cell), revision).sealed

        seal = view.seal(path)
        problems = seal_differences(view.current(path), seal, sealed_under, view.hashes.get(path))
        folder, note = cache_folder(cache_dir, seal)
        if folder is None:
            problems += [note] if note else []
            return (False, "; ".join(problems)) if problems else None
        total = sum(n for _, n in seal["requests"])
        if len(table) != total:
            return False, "; ".join([*problems, f"{len(table)} rows, the seal's requests hold {total}"])
        index, starts = {}, [0]
        for i, (key, n) in enumerate(seal["requests"]):
            index.setdefault(key, []).append(i)  # a key that is no string fails here (TypeError)
            starts.append(starts[-1] + len(range(n)))  # and a count that is no integer here
        rows = [row for batch in view.batches(path, list(ROW_COLUMNS)) for row in row_digests(batch)]
        return Pending(folder, rows, seal["requests"], starts, index, problems)
    except SealError as e:
        return False, str(e)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return unreadable(e)


ROW_COLUMNS = ("token_ids", "text", "finish_reason")


def row_digests(batch) -> list[tuple[bytes, object]]:
    """A batch of raw rows as the audit compares them with the cache: (``content_digest`` of token ids
    and text, finish reason) per row."""
    ids, texts, reasons = (batch.column(c) for c in ROW_COLUMNS)
    return [
        (content_digest(np.asarray(i, dtype=np.int64).tobytes(), text), reason)
        for i, text, reason in zip(ids.to_numpy(zero_copy_only=False), texts.to_pylist(), reasons.to_pylist())
    ]


def unreadable(e: Exception) -> tuple[bool, str]:
    return False, f"unreadable as a raw table: {type(e).__name__}: {printable(str(e))[:300]}"


def compare_folder(pending: dict[str, Pending], folder: Path, rows: dict[str, list]) -> None:
    """Compare every pending file of ``folder`` with the cached rows of its keys (``cache_rows.folder_rows``)."""
    for file in pending.values():
        if file.folder != folder:
            continue
        try:
            for key in file.index.keys() & rows.keys():
                for i in file.index[key]:
                    file.compared[i] = row_differences(file, i, key, rows[key])
        except (ValueError, TypeError) as e:  # a row's token ids that are no integers
            file.error = e


def row_differences(file: Pending, i: int, key: str, cached: list) -> list[str]:
    """How the rows of request ``i`` differ from its ``cached`` rows (``cache_rows.cached_row``): text,
    token ids or finish reason. A cached row whose ids are not integers raises its error (its file
    unreadable)."""
    found = []
    for j, (digest, finish_reason) in enumerate(file.rows[file.starts[i] : file.starts[i + 1]]):
        stored, reason = cached[j] if j < len(cached) else (None, None)
        if isinstance(stored, Exception):
            raise stored
        if stored is None or digest != stored:
            found.append(f"request {key[:12]} sample {j}: text or token ids differ from the cache")
        elif finish_reason != reason:
            found.append(f"request {key[:12]} sample {j}: finish_reason differs from the cache")
    return found


def verdict(file: Pending, limit: int = 3) -> tuple[bool, str]:
    """A compared file's line: its seal's problems, the rows whose requests no shard holds, the first
    ``limit`` rows that differ, in row order."""
    if isinstance(file.error, OSError):
        return False, f"not checked against the cache: {type(file.error).__name__}: {printable(str(file.error))[:300]}"
    if file.error is not None:
        return unreadable(file.error)
    missing = sum(n for i, (_, n) in enumerate(file.sealed) if i not in file.compared)
    found = [line for i in sorted(file.compared) for line in file.compared[i]]
    problems = [*file.problems, *([f"{missing} rows' requests are not in the cache"] if missing else [])]
    if found:
        problems.append(f"{len(found)} rows differ from the cache: " + "; ".join(found[:limit]))
    return (False, "; ".join(problems)) if problems else (True, "sealed, and every row equal to the generation cache")


def by_model(raw: dict, models: dict[str, str] | None) -> list:
    """The raw files in the order their cache folders are read: by the model of their cell
    (``models``: cell -> model key), then by path; by path alone without ``models``."""
    return sorted(raw.items(), key=lambda item: ((models or {}).get(item[1][0], ""), item[0]))


def raw_checks(view: StudyView, raw: dict, protocols: dict[str, dict], cache_dir, cache_note: str,
               models: dict[str, str] | None = None, seeds: dict | None = None,
               honoured: dict | None = None) -> dict[str, tuple[bool, str]]:  # fmt: skip
    """Per raw file present: (whether it matches its seal and the cache, what was checked or found),
    read through the study's view (``cotdyn.audit.view``: the files the bounds kept from being
    parsed, and why; each other file's hash and seal problem, found before anything was parsed).
    ``cache_note``: why the config's cache was not opened; ``models``: each cell's model, so that one
    model's raw files are compared together, their cache folder read once, a shard at a time, and let
    go before the next model's (memory does not grow with the number of models); ``seeds``: where
    given, each samples file's seed check (``registration.seed_check``: rows checked, problem), from
    the requests its raw check reads (``honoured``: cell -> the seeds its backend's sampler honours)."""
    refused, sealed = view.refused, view.sealed
    checks: dict[str, tuple[bool, str]] = {}
    ordered = by_model(raw, models)
    for model in dict.fromkeys((models or {}).get(cell, "") for _, (cell, _, _) in ordered):
        pending = {}
        for path, (cell, variant, chains) in ordered:
            if (models or {}).get(cell, "") != model:
                continue
            read = None
            if seeds is not None and seeds_checked(path, chains, protocols[variant], refused):
                read = seeds_of(view, path, cell, protocols[variant], chains, honoured, seeds)
            if path in refused or (chains in refused):
                checks[path] = (False, f"not parsed: {refused.get(path) or chains + ' refused'}")
            elif not view.holds(path) or (chains and not view.holds(chains)):
                continue
            elif sealed.get(path):
                checks[path] = (False, sealed[path])
            else:
                found = raw_check(view, path, cell, protocols[variant], chains, cache_dir, read)
                if isinstance(found, Pending):
                    pending[path] = found
                else:
                    checks[path] = found or (
                        True,
                        f"sealed; {cache_note or f'generation cache {cache_dir} absent'}, rows not compared with it",
                    )
        for folder in dict.fromkeys(file.folder for file in pending.values()):
            keys = {key for file in pending.values() if file.folder == folder for key in file.index}
            try:
                rows = folder_rows(folder, keys)
            except OSError as e:  # the folder is unreadable
                for file in pending.values():
                    file.error = e if file.folder == folder else file.error
                continue
            compare_folder(pending, folder, rows)
        checks.update({path: verdict(file) for path, file in pending.items()})
    return checks


def apply_raw_checks(files: list[FileCheck], checks: dict[str, tuple[bool, str]]) -> list[FileCheck]:
    """The manifest comparison with each raw file's seal and cache check laid over it: a raw file
    whose hash matches the manifest but not what generation wrote fails."""
    out = []
    for f in files:
        ok, detail = checks.get(f.path, (True, ""))
        if f.status == MATCH and f.path in checks:
            f = FileCheck(f.path, MATCH if ok else MISMATCH, detail)
        elif not ok:  # already failing its manifest hash: say what the raw check found too
            f = FileCheck(f.path, f.status, f"{f.detail}; {detail}")
        out.append(f)
    return out
