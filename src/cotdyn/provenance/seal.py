"""Seals of the raw data (docs/reference.md section 7): what generation wrote, recorded when it wrote it.

A generation rule (reference, continuations) writes, beside its ``chains.parquet`` or
``samples.parquet``, a ``seal.json``: the file's sha256 and size, its rows, the model revision
and the content address (cache key) and sample count of every request its rows came from, in
row order. Every rule that reads chains or samples checks the seal first (``check_sealed``), so
a rerun never derives from a file that generation did not write; the audit goes further and
compares the rows with the generation cache under those keys (``cotdyn.audit.raw``).

The file is placed with its seal by the first job to finish (``write_seal``): a duplicate job of
the same output (an orphan of a lost controller and its resubmission) never replaces it.

A file without a seal, or one whose bytes differ from its seal, is refused with a message naming
it and saying how to restore it: remove it, and the rerun regenerates it from the cache, where
every request it holds is kept (byte-identical; no sampling runs again).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

from cotdyn.provenance.manifests import file_sha256

SEAL = "seal.json"
RAW_FILES = ("chains.parquet", "samples.parquet")
# A seal lists a cache key and a count per request of its file: some 80 bytes each, a few MB for the
# largest cell. Beyond this it is refused, not read into memory.
MAX_SEAL_BYTES = 256 << 20
MAX_SUMMARY_BYTES = 64 << 20  # a cell's summary.json: a few kB of counts and rates


class SealError(ValueError):
    pass


def seal_path(raw_path: str | Path) -> Path:
    """The seal of a raw file: ``seal.json`` in its folder (each folder holds one raw file)."""
    return Path(raw_path).with_name(SEAL)


def requests_sha256(requests: list[list]) -> str:
    return hashlib.sha256(json.dumps(requests, separators=(",", ":")).encode()).hexdigest()


def unsealed_path(raw_path: str | Path) -> Path:
    """Where a generation rule has its raw file (and its generation.json) written before
    ``write_seal`` places them."""
    raw_path = Path(raw_path)
    return raw_path.with_name(f"{raw_path.stem}.unsealed{raw_path.suffix}")


def make_seal(
    raw_path: str | Path, model_revision: str, requests: list[tuple[str, int]], written: str | Path | None = None
) -> dict:
    """The seal of ``raw_path`` as generation wrote it (to ``written``, when not yet in place);
    ``requests``: (cache key, samples) per request, in the order of the file's rows."""
    raw_path, written = Path(raw_path), Path(written or raw_path)
    listed = [[str(key), int(n)] for key, n in requests]
    return {
        "file": raw_path.name,
        "sha256": file_sha256(written),
        "bytes": written.stat().st_size,
        "rows": sum(n for _, n in listed),
        "model_revision": model_revision,
        "requests_sha256": requests_sha256(listed),
        "requests": listed,
    }


def write_seal(
    raw_path: str | Path,
    model_revision: str,
    requests: list[tuple[str, int]],
    written: str | Path | None = None,
    companions: dict | None = None,
) -> dict | None:
    """Write the seal of ``raw_path``. With ``written`` (its ``unsealed_path``) the file is then
    placed together with its seal and ``companions`` ({final path: written path}: the phase's
    generation.json), and the first writer wins: of two jobs writing one output (a duplicate that a
    lost controller left running), the first to link its file into place keeps it; the other
    discards its own file, seal and companions and returns None. The link is the one atomic step;
    the seal follows it at once, so a kill between the two leaves at worst a file whose seal does
    not match it, which every reader refuses with the restore hint."""
    from cotdyn.files.writers import json_bytes, write_json

    raw_path = Path(raw_path)
    seal = make_seal(raw_path, model_revision, requests, written)
    if written is None or Path(written) == raw_path:
        write_json(seal, seal_path(raw_path))
        return seal
    staged = seal_path(raw_path).with_name(f".{SEAL}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    with open(staged, "xb") as f:  # created exclusively: a link placed there is never followed
        f.write(json_bytes(seal))
    try:
        os.link(written, raw_path)
    except FileExistsError:
        for path in (written, staged, *(companions or {}).values()):
            Path(path).unlink(missing_ok=True)
        print(f"{raw_path}: another job placed it first; it is kept and this job's copy discarded (first writer wins)")
        return None
    os.replace(staged, seal_path(raw_path))
    Path(written).unlink()
    for final, path in (companions or {}).items():
        os.replace(path, final)
    return seal


def restore_hint(raw_path: str | Path) -> str:
    return (
        f"to restore what generation wrote, remove it (rm {raw_path}) and rerun: the rerun regenerates it, "
        "byte-identical, from the generation cache"
    )


def read_seal(raw_path: str | Path) -> dict:
    """The seal of ``raw_path``; SealError naming the seal when it is absent or unreadable."""
    from cotdyn.files.strict import MissingFile, UntrustedFileError, read_json

    path = seal_path(raw_path)
    try:
        # strictly (cotdyn.files.strict): a FIFO or a device there is named, not opened; bounded in
        # bytes and depth; a key written twice (two sha256 fields) is refused, not taken by position
        seal = read_json(path, max_bytes=MAX_SEAL_BYTES)
    except MissingFile:
        raise SealError(
            f"{raw_path} has no seal ({path}): nothing shows generation wrote it; {restore_hint(raw_path)}"
        ) from None
    except UntrustedFileError as e:
        raise SealError(f"damaged seal: {e}; {restore_hint(raw_path)}") from None
    try:
        if not isinstance(seal, dict) or not all(k in seal for k in ("file", "sha256", "requests")):
            raise ValueError("not a seal (needs file, sha256, requests)")
        if requests_sha256(seal["requests"]) != seal.get("requests_sha256"):
            raise ValueError("its requests do not hash to its requests_sha256")
    except (ValueError, TypeError) as e:
        raise SealError(f"{path}: damaged seal ({e}); {restore_hint(raw_path)}") from None
    if seal["file"] != Path(raw_path).name:
        raise SealError(f"{path} seals {seal['file']}, not {Path(raw_path).name}; {restore_hint(raw_path)}")
    return seal


def seal_problem(raw_path: str | Path) -> str | None:
    """Why ``raw_path`` does not match its seal, or None when it does."""
    try:
        seal = read_seal(raw_path)
    except SealError as e:
        return str(e)
    found = file_sha256(raw_path)
    if found != seal["sha256"]:
        return (
            f"{raw_path} is not the file generation wrote: its sha256 {found} differs from the sealed "
            f"{seal['sha256']} ({seal_path(raw_path)}); {restore_hint(raw_path)}"
        )
    return None


def check_sealed(raw_path: str | Path) -> None:
    """Refuse (SealError) a raw file that exists and does not match its seal; a missing file passes
    (the workflow generates it)."""
    if Path(raw_path).exists():
        problem = seal_problem(raw_path)
        if problem:
            raise SealError(problem)


def unreadable_tables(study_dir: str | Path) -> list[tuple[Path, str]]:
    """Each cell's derived tables (records.parquet, summary.json) that exist but do not read, with why:
    a truncated parquet, a torn JSON. Reading a parquet's footer is enough to catch a cut file."""
    import pyarrow.parquet as pq

    damaged = []
    for path in sorted(Path(study_dir).glob("cells/*/*/records.parquet")):
        try:
            pq.read_metadata(path)
        except Exception as e:  # pyarrow raises OSError or ArrowInvalid, by what it meets
            damaged.append((path, f"{type(e).__name__}: {e}"))
    from cotdyn.files.strict import read_json

    for path in sorted(Path(study_dir).glob("cells/*/*/summary.json")):
        try:
            read_json(path, max_bytes=MAX_SUMMARY_BYTES)
        except ValueError as e:  # UntrustedFileError: not JSON, too large or deep, not a regular file
            damaged.append((path, str(e)))
    return damaged
