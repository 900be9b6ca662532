"""Content-addressed generation cache (docs/reference.md section 3).

A request is keyed by (model revision, prompt ids, sampling parameters, seed, n), so a prefix
that two variants share is sampled once, and a killed run resumes without re-sampling or
duplicating. Each chunk of results is one shard file written atomically (temporary file, then
rename) with a checksum of its body; a torn or altered shard is detected on load, reported and
ignored, so its requests are generated again rather than trusted. The temporary file of a write
a kill interrupted is removed when the cache next opens (``stale_temporaries``), once no process
can still be writing it.

Within a chunk, every sample is journaled as the backend finishes it (``cotdyn.generation.journal``),
so a kill loses only the samples in flight: a resumed run hands the backend the chunk's samples
already drawn, and writes the chunk's shard, the same bytes, once the rest are drawn; the samples
in flight restart from their prompt.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from tqdm import tqdm

from cotdyn.files.strict import parse_json, read_text
from cotdyn.generation import journal as J
from cotdyn.generation.backends.base import Backend, Completion, GenerationStats, Request, request_keys


def revision_folder(cache_dir, model_revision: str) -> Path:
    """The cache folder of one model revision: a job loads only the shards its model can use."""
    return Path(cache_dir) / model_revision.replace("/", "_")


# A shard's temporary file is named <host>.<pid>.<random>.tmp. One untouched this long is stale
# whoever wrote it (a write takes seconds: the body is built in memory first); one of this host
# whose process has ended is stale at once. Studies sharing the cache never lose a write in flight.
STALE_SECONDS = 3600


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _abandoned(path: Path, now: float) -> bool:
    """Whether no process can still be writing ``path`` (named <host>.<pid>.<random>.<suffix>)."""
    try:
        age = now - path.stat().st_mtime
    except FileNotFoundError:  # renamed into place or removed meanwhile
        return False
    parts = path.name.split(".")
    mine = len(parts) >= 4 and ".".join(parts[:-3]) == socket.gethostname() and parts[-3].isdigit()
    return age > STALE_SECONDS or (mine and not _alive(int(parts[-3])))


def stale_temporaries(directory: Path, now: float | None = None) -> list[Path]:
    """The shard temporaries in ``directory`` no write can still be using (``STALE_SECONDS``)."""
    now = time.time() if now is None else now
    return [tmp for tmp in sorted(directory.glob("*.tmp")) if _abandoned(tmp, now)]


# A shard holds one chunk of a run's results; with chunk_size 0 a whole cell's samples (token ids and
# texts): some hundreds of MB for the largest studies. Beyond this it is refused, not read into memory.
MAX_SHARD_BYTES = 2 << 30


def shards(directory: Path) -> list[Path]:
    """A cache folder's shards, in the order they are loaded."""
    return sorted(Path(directory).glob("*.json"))


SHARD_DAMAGE = (ValueError, KeyError, TypeError, AttributeError)  # what a damaged shard raises (shard_body)


def shard_body(shard: Path) -> dict:
    """A shard's samples by key as written, read strictly (cotdyn.files.strict: a regular file,
    bounded, no key twice, nested as a shard nests) and its checksum checked; one of SHARD_DAMAGE
    saying why it is damaged."""
    if shard.is_symlink():  # a shard is a file the cache wrote, never a link elsewhere
        raise ValueError("a symlink, not a shard")
    payload = parse_json(read_text(shard, max_bytes=MAX_SHARD_BYTES), shard)
    body = payload["body"]
    if hashlib.sha256(body.encode()).hexdigest() != payload["sha256"]:
        raise ValueError("checksum mismatch")
    samples = parse_json(body, shard)
    if not isinstance(samples, dict):
        raise ValueError("its body is not a table of keys")
    return samples


def shard_samples(shard: Path) -> dict[str, list[tuple[tuple, object, object]]] | str:
    """One shard's samples by key, each (token ids, text, finish reason) as written, or why it is
    ignored (a torn write or tampering: its requests are generated again, never trusted)."""
    try:
        return {
            key: [(tuple(ids), text, reason) for ids, text, reason in samples]
            for key, samples in shard_body(shard).items()
        }
    except SHARD_DAMAGE as e:
        print(f"generation cache: ignoring damaged shard {shard} ({e})", file=sys.stderr)
        return f"{shard.name}: {e}"


def read_shard(shard: Path) -> dict[str, list[Completion]] | str:
    """One shard's completions by key, or why it is ignored (``shard_samples``). A cache
    holds each key's completions from the last shard, in name order, that holds it."""
    samples = shard_samples(shard)
    if isinstance(samples, str):
        return samples
    return {key: [Completion(*sample) for sample in found] for key, found in samples.items()}


class GenerationCache:
    """``read_only``: the audit's view of a cache it was handed: nothing is created, cleaned up or
    written (a stale temporary there is left alone; ``put`` refuses), and journals are not read:
    only sealed shards are evidence."""

    def __init__(self, directory: str | Path, read_only: bool = False):
        self.directory = Path(directory)
        self.read_only = read_only
        self.entries: dict[str, list[Completion]] = {}
        self.rejected: list[str] = []
        # samples journaled by earlier runs whose chunk never reached a shard, by key and index
        self.journaled: dict[str, dict[int, Completion]] = {}
        self._journals: dict[Path, set[str]] = {}  # each earlier journal and the keys it holds
        if not read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
            for tmp in stale_temporaries(self.directory):
                print(f"generation cache: removing {tmp}, left by an interrupted write", file=sys.stderr)
                tmp.unlink(missing_ok=True)
        for shard in shards(self.directory):
            self._load(shard)
        if not read_only:
            for path in sorted(self.directory.glob(f"*{J.SUFFIX}")):
                found, _ = J.read(path)
                self._journals[path] = set(found)
                for key, samples in found.items():
                    if key not in self.entries:
                        self.journaled.setdefault(key, {}).update(samples)
            self._sweep_journals()

    def _load(self, shard: Path) -> None:
        entries = read_shard(shard)
        if isinstance(entries, str):
            self.rejected.append(entries)
        else:
            self.entries.update(entries)

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def get(self, key: str) -> list[Completion]:
        return self.entries[key]

    def put(self, results: dict[str, list[Completion]]) -> str:
        """Write ``results`` as one shard; its file name."""
        if self.read_only:
            raise PermissionError(f"generation cache {self.directory} was opened read-only")
        body = json.dumps(
            {k: [[list(c.token_ids), c.text, c.finish_reason] for c in v] for k, v in sorted(results.items())},
            separators=(",", ":"),
        )
        digest = hashlib.sha256(body.encode()).hexdigest()
        payload = json.dumps({"sha256": digest, "body": body})
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f"{socket.gethostname()}.{os.getpid()}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / f"{digest}.json")
        self.entries.update(results)
        for key in results:
            self.journaled.pop(key, None)
        self._sweep_journals()
        return f"{digest}.json"

    def journal(self) -> J.Journal:
        """A new journal for one chunk's samples, beside the shards."""
        if self.read_only:
            raise PermissionError(f"generation cache {self.directory} was opened read-only")
        return J.Journal(self.directory)

    def _sweep_journals(self) -> None:
        """Remove the earlier journals whose every sample is now in a shard, once no process writes them."""
        now = time.time()
        for path, keys in list(self._journals.items()):
            if all(k in self.entries for k in keys) and _abandoned(path, now):
                path.unlink(missing_ok=True)
                del self._journals[path]


def _draw(backend, requests: list[Request], keys: list[str], cache, desc: str):
    """One chunk's completions from the backend, each sample journaled as it finishes; the samples
    an earlier run journaled are handed over as ``done`` and not drawn again. Returns the
    completions, the samples that came from journals, and the chunk's journal (None without one)."""
    if cache is None:
        return backend.generate(requests, desc=desc), {}, None
    done = {(i, j): c for i, k in enumerate(keys) for j, c in cache.journaled.get(k, {}).items() if j < requests[i].n}
    journal = cache.journal()

    def on_done(rows: list[tuple[int, int, Completion]]) -> None:
        journal.append([(keys[i], j, c) for i, j, c in rows])

    try:
        out = backend.generate(requests, desc=desc, done=done, on_done=on_done)
    except BaseException:
        if journal.fd is not None:  # what it drew stays journaled for the next run
            os.close(journal.fd)
        raise
    return out, done, journal


def generate(
    backend: Backend,
    requests: Sequence[Request],
    cache: GenerationCache | None,
    chunk_size: int = 0,
    desc: str = "",
    on_first_chunk: Callable[[int, int, float], None] | None = None,
) -> tuple[list[list[Completion]], GenerationStats]:
    """Completions for ``requests``, from the cache where present, else from the backend.

    Pending requests go to the backend in chunks of ``chunk_size`` (0 = one call for all), each
    chunk cached as it finishes; the chunks are a fixed partition of the request list, so a
    resumed run hands the backend the same batches as an uninterrupted one. Within a chunk each
    sample is journaled as the backend finishes it, and a resumed run hands the backend those it
    finds as already done (``_draw``). ``on_first_chunk(rows, pending_rows, seconds)``: told once
    the first chunk with pending requests is generated and cached, its rows (samples) and seconds
    beside all the pending rows of the call (the timing forecast's).
    """
    stats = GenerationStats(requests=len(requests))
    started = time.time()
    keys = request_keys(requests, backend.model_revision)
    by_key = dict(zip(keys, requests))
    unique = list(by_key)
    size = chunk_size or max(1, len(unique))
    chunks = [unique[i : i + size] for i in range(0, len(unique), size)]
    results: dict[str, list[Completion]] = {}
    pending_rows = sum(by_key[k].n for k in unique if cache is None or k not in cache)
    with tqdm(total=len(unique), desc=desc or "generate", unit="request", disable=len(chunks) < 2) as bar:
        for chunk in chunks:
            pending = [k for k in chunk if cache is None or k not in cache]
            stats.cached_requests += len(chunk) - len(pending)
            if pending:
                chunk_started = time.perf_counter()
                out, done, journal = _draw(backend, [by_key[k] for k in pending], pending, cache, desc)
                fresh = dict(zip(pending, out))
                stats.calls += 1
                stats.journaled_samples += len(done)
                # tokens drawn now: a journaled sample's were drawn (and timed) by the run it was killed in
                stats.generated_tokens += sum(len(c.token_ids) for o in out for c in o)
                stats.generated_tokens -= sum(len(c.token_ids) for c in done.values())
                if cache is not None:
                    cache.put(fresh)
                if journal is not None:
                    journal.remove()  # the shard holds every line now
                results.update(fresh)
                if on_first_chunk and stats.calls == 1:
                    rows = sum(by_key[k].n for k in pending)
                    on_first_chunk(rows, pending_rows, time.perf_counter() - chunk_started)
            bar.update(len(chunk))
    completions = [results[k] if k in results else cache.get(k) for k in keys]  # type: ignore[union-attr]
    stats.samples = sum(r.n for r in requests)
    stats.prompt_tokens = sum(len(r.prompt_ids) for r in requests)
    stats.seconds = time.time() - started
    return completions, stats
