"""The generation journal: each sample written down the moment the backend finishes it (issue 53).

A chunk's shard (``cotdyn.generation.cache``) is written once the whole chunk is generated, and a
chunk can be hours of work (the embedded default's reference phase is one chunk, one batch). So
every finished sample is also appended to a journal, one per process and chunk, named
``<host>.<pid>.<random>.journal`` beside the shards. A run resumed after a kill reads every journal
of its cache folder and hands the backend the samples already drawn, so it generates only what the
kill interrupted. Once the chunk's shard is written the journal is removed.

Why one append-only file and not a file per sample: a panel's chunk is thousands of requests of m
samples each, and a file per sample would be tens of thousands of files to create, list and read
per cell; a line costs one ``write`` call. Why not rewrite a shard per sample: a shard is a JSON
document with one checksum, so adding a sample would rewrite the chunk so far (quadratic).

A line is ``<sha256 of the rest> <json>\\n`` and is written with one ``os.write`` on an
``O_APPEND`` descriptor: once that call returns, the line is in the kernel and survives a
``kill -9`` of the process. ``fsync`` (which only a power loss or a kernel crash needs) is called
at most once a second, so a slow disk never paces the sampler. A line cut short by a kill, or one
altered, fails its checksum and is skipped on reading: its sample is generated again, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path

from cotdyn.generation.backends.base import Completion

SUFFIX = ".journal"
FSYNC_SECONDS = 1.0  # the most a power loss (not a kill) can take back


def _line(key: str, j: int, c: Completion) -> bytes:
    body = json.dumps([key, j, list(c.token_ids), c.text, c.finish_reason], separators=(",", ":"))
    return f"{hashlib.sha256(body.encode()).hexdigest()} {body}\n".encode()


class Journal:
    """One process's journal of one chunk, created at its first line."""

    def __init__(self, directory: Path):
        self.path = directory / f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(4)}{SUFFIX}"
        self.fd: int | None = None
        self.synced = time.monotonic()
        self.lines = 0

    def append(self, rows: list[tuple[str, int, Completion]]) -> None:
        """Write ``rows`` (request key, sample index, completion) in one ``write``."""
        if not rows:
            return
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        data = b"".join(_line(k, j, c) for k, j, c in rows)
        view = memoryview(data)
        while view:  # a regular file takes it whole; the loop only guards a short write
            view = view[os.write(self.fd, view) :]
        self.lines += len(rows)
        if time.monotonic() - self.synced > FSYNC_SECONDS:
            os.fsync(self.fd)
            self.synced = time.monotonic()

    def remove(self) -> None:
        """Close and delete: called once the chunk's shard holds every line."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.path.unlink(missing_ok=True)


def read(path: Path) -> tuple[dict[str, dict[int, Completion]], int]:
    """The samples a journal holds, by request key and sample index, and the lines skipped."""
    found: dict[str, dict[int, Completion]] = {}
    skipped = 0
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # removed by its writer meanwhile: its chunk is in a shard
        return found, 0
    for raw in data.split(b"\n"):
        if not raw:
            continue
        try:
            digest, body = raw.decode().split(" ", 1)
            if hashlib.sha256(body.encode()).hexdigest() != digest:
                raise ValueError("checksum mismatch")
            key, j, ids, text, reason = json.loads(body)
            found.setdefault(key, {})[int(j)] = Completion(tuple(ids), text, reason)
        except (ValueError, TypeError, UnicodeDecodeError):  # a torn last line, or tampering
            skipped += 1
    if skipped:
        print(f"generation cache: {skipped} damaged line(s) in journal {path} skipped", file=sys.stderr)
    return found, skipped
