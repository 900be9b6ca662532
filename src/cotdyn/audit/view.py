"""The study folder as the audit's admission found it (``audit.untrusted.admit``), and its one
reader after (docs/reference.md section 7).

Each regular file the admission's walk found is hashed once; each raw table is bounded
(``audit.bounds.admit_raw``) and its seal checked before a row of it is parsed. A file the walk did
not find as a regular file is not there, and one changed since the walk (another inode, size or
modification time) is refused by name rather than read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from cotdyn.audit.bounds import admit_raw, decoded_problem, seal_problem
from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.files.layout import problems as problems_file
from cotdyn.files.strict import UntrustedFileError, regular_file
from cotdyn.files.terminal import printable
from cotdyn.provenance.manifests import EXCLUDED_DIRS, file_sha256
from cotdyn.provenance.seal import read_seal, seal_path

MAX_PROBLEMS_BYTES = 1 << 30  # a stored problems table, on disk and decoded: MATH-500's is under 1 MB
TOKEN_IDS = ("prompt_ids", "token_ids")


@dataclass(frozen=True)
class StudyView:
    root: Path
    entries: dict[str, os.stat_result]  # the admission's walk: relative path -> lstat
    hashes: dict[str, str]  # sha256 of each regular file the manifest compares
    refused: dict[str, str]  # raw tables the bounds keep from being parsed, and why
    sealed: dict[str, str | None]  # each other raw table's seal problem (None: none)

    def holds(self, rel: str) -> bool:
        """Whether the walk found ``rel`` as a regular file."""
        st = self.entries.get(rel)
        return st is not None and stat.S_ISREG(st.st_mode)

    def current(self, rel: str) -> Path:
        """The path of ``rel``, once it is still the file the walk found; UntrustedFileError otherwise."""
        path = self.root / rel
        if not self.holds(rel):
            raise UntrustedFileError(f"{printable(rel)}: not a file the audit's admission found in {self.root}")
        found, now = self.entries[rel], None
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            pass
        if now is None or (now.st_ino, now.st_size, now.st_mtime_ns) != (
            found.st_ino,
            found.st_size,
            found.st_mtime_ns,
        ):
            raise UntrustedFileError(f"{printable(rel)}: changed since the audit admitted {self.root}; not read")
        return path

    def table(self, rel: str, ids: bool = True) -> pd.DataFrame | None:
        """A raw table the bounds admitted, or None where they refused it; without its token ids
        where ``ids`` is false (pages that show texts: as Python arrays, a panel cell's ids held some
        60 MB where the rest of its table held 1)."""
        if rel in self.refused:
            return None
        path = self.current(rel)
        if ids:
            return pd.read_parquet(path)
        import pyarrow.parquet as pq

        return pd.read_parquet(path, columns=[c for c in pq.read_schema(path).names if c not in TOKEN_IDS])

    def batches(self, rel: str, columns: list[str], rows: int = 4096):
        """Raw table ``rel`` (one the bounds admitted) read ``rows`` at a time, ``columns`` only, as
        Arrow record batches: the raw check digests a panel cell's token ids so, never holding them."""
        import pyarrow.parquet as pq

        with pq.ParquetFile(self.current(rel)) as table:
            yield from table.iter_batches(batch_size=rows, columns=columns)

    def seal(self, rel: str) -> dict:
        """The seal of raw table ``rel`` (``provenance.seal.read_seal``: SealError when it has none),
        once it is still the file the walk found (a seal that appeared or changed since is refused)."""
        sealed = seal_path(rel).as_posix()
        if self.holds(sealed) or os.path.lexists(self.root / sealed):
            self.current(sealed)
        return read_seal(self.root / rel)

    def problems(self, benchmark_key: str) -> pd.DataFrame | None:
        """A benchmark's stored problems table (``read_problems``), or None where the study has none."""
        rel = problems_file(benchmark_key)
        return read_problems(self.current(rel)) if self.holds(rel) else None


def study_view(root: Path, entries: dict[str, os.stat_result], raw: list[str]) -> StudyView:
    """The view of an admitted study (``entries``: its walk) whose raw tables are ``raw``."""
    refused = admit_raw(root, list(raw))
    hashes = stored_hashes(root, entries)
    sealed = {p: seal_problem(root / p, hashes[p]) for p in raw if p not in refused and p in hashes}
    return StudyView(Path(root), entries, hashes, refused, sealed)


def stored_hashes(study_dir: Path, entries: dict[str, os.stat_result]) -> dict[str, str]:
    """The sha256 of every regular file the admission's walk found, as ``output_hashes`` gives them
    for a manifest (logs, report pages and the manifest itself aside), without listing the folder
    again. A file that is gone since the walk is left out, so the comparison names it missing."""
    hashes = {}
    for rel, st in sorted(entries.items()):
        if stat.S_ISREG(st.st_mode) and rel.split("/")[0] not in EXCLUDED_DIRS and rel != STUDY_MANIFEST:
            try:
                hashes[rel] = file_sha256(study_dir / rel)
            except FileNotFoundError:
                continue
    return hashes


def read_problems(path: Path) -> pd.DataFrame:
    """A stored problems table (untrusted, as the whole study), read once it is a regular file within
    the bounds: its bytes, and what it decodes to (a dictionary bomb decodes to many times its size)."""
    st = regular_file(path)
    if st.st_size > MAX_PROBLEMS_BYTES:
        raise UntrustedFileError(f"{path}: {st.st_size} bytes, more than a problems table holds ({MAX_PROBLEMS_BYTES})")
    problem = decoded_problem(path, MAX_PROBLEMS_BYTES)
    if problem:
        raise UntrustedFileError(f"{path}: {problem}")
    return pd.read_parquet(path)
