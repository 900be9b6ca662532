"""Snapshots of a batch being decoded: what a kill of a long batch loses is bounded by time (issue 53).

The journal (``cotdyn.generation.journal``) keeps each sample once it is finished; a batch whose
rows all run to their budget finishes them together at its end, so a kill before that would lose
the whole batch's decoding. A backend that can (transformers, ``decode: compacting``) hands this
store its batch's state every ``SNAPSHOT_SECONDS``: the keys and values decoded since the last
snapshot, each row's tokens and generator, the step. A resumed run finds the snapshots of the batch
it is about to decode by the batch's name (a hash of its rows' content addresses and the backend's
settings), restores them and decodes on from the last one, with the very bits (keys and values are
saved as computed, never rebuilt by a prefill). Once the batch is decoded its snapshots are removed.

A snapshot is one segment: ``<batch>.<index>.snapshot``, a safetensors file (no code runs on
loading it) whose metadata carries a sha256 over its metadata and tensor bytes. Segments are
incremental (segment k holds the columns decoded since segment k - 1), so a batch's snapshots
write its keys and values once in all, not once per snapshot. Each is written to a temporary name
and renamed into place, so a kill leaves either the whole segment or none; a segment that fails its
checksum ends the run of segments read, and the batch resumes from the one before.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

SUFFIX = ".snapshot"
SNAPSHOT_SECONDS = 3.0  # a kill loses at most this much decoding, plus the step in flight
# ... or this many times what the last snapshot took to write, if longer: writing snapshots costs a
# decode at most a tenth of its time (a segment of 64 rows by 30 columns of a 135M model is 88 MB)
COST_RATIO = 10.0
MAX_SEGMENT_BYTES = 4 << 30  # a batch's keys and values; beyond this a segment is refused unread


# torch and safetensors are imported where used: the simulated and server backends' environments
# (envs/) have neither, and never write a snapshot


def _digest(meta: dict, tensors: dict) -> str:
    import torch

    h = hashlib.sha256(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(tensors):
        t = tensors[name].contiguous().cpu()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy())  # the tensor's own buffer, not a copy
    return h.hexdigest()


class SnapshotStore:
    """The snapshots of one cache folder (``directory``), by batch name and segment index."""

    seconds = SNAPSHOT_SECONDS
    cost_ratio = COST_RATIO

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def _path(self, batch: str, index: int) -> Path:
        return self.directory / f"{batch}.{index:05d}{SUFFIX}"

    def save(self, batch: str, index: int, tensors: dict, meta: dict) -> None:
        """Write segment ``index`` of ``batch`` atomically: a temporary file renamed into place."""
        from safetensors.torch import save

        tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        meta = {**meta, "batch": batch, "index": index}
        data = save(tensors, metadata={"meta": json.dumps(meta), "sha256": _digest(meta, tensors)})
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f"{socket.gethostname()}.{os.getpid()}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self._path(batch, index))

    def load(self, batch: str) -> list[tuple[dict, dict]]:
        """The segments 0, 1, ... of ``batch`` up to the first missing or damaged one, as (meta, tensors)."""
        from safetensors import SafetensorError

        segments = []
        while (path := self._path(batch, len(segments))).is_file():
            try:
                segments.append(read_segment(path, batch, len(segments)))
            except (
                ValueError,
                KeyError,
                TypeError,
                OSError,
                SafetensorError,
            ) as e:  # torn or altered: decode from the one before
                print(f"generation cache: ignoring damaged snapshot {path} ({e})", file=sys.stderr)
                break
        return segments

    def remove(self, batch: str) -> None:
        """Delete every segment of ``batch`` (its rows are decoded and told)."""
        for path in self.directory.glob(f"{batch}.*{SUFFIX}"):
            path.unlink(missing_ok=True)


def read_segment(path: Path, batch: str | None = None, index: int | None = None) -> tuple[dict, dict]:
    """A segment's (meta, tensors), checked against its checksum and, where given, its name's batch and index."""
    from safetensors import safe_open

    if path.is_symlink() or path.stat().st_size > MAX_SEGMENT_BYTES:
        raise ValueError("a link, or larger than a segment can be")
    with safe_open(path, framework="pt") as f:
        header = f.metadata() or {}
        meta = json.loads(header["meta"])
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    if not isinstance(meta, dict) or _digest(meta, tensors) != header["sha256"]:
        raise ValueError("checksum mismatch")
    if (batch is not None and meta.get("batch") != batch) or (index is not None and meta.get("index") != index):
        raise ValueError("not the segment its name says")
    return meta, tensors


def segment_keys(path: Path) -> set[str] | None:
    """The request keys a segment's batch decodes (its header alone); None if it cannot be read."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="pt") as f:
            keys = json.loads((f.metadata() or {})["meta"]).get("keys")
        return {str(k) for k in keys} if isinstance(keys, list) else None
    except (ValueError, KeyError, TypeError, OSError, SafetensorError):
        return None
