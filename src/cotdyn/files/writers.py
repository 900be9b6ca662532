"""Every output file a study writes goes through here: parquet, JSON, CSV, text and PNG.

Each writer writes to a fresh temporary file and renames it into place, so a killed job never leaves a
torn file, and writes byte-stable content: sorted JSON keys, a fixed float format and ``\\n``
line ends in CSV, PNGs at a fixed dpi without the Software stamp. Equal data give equal bytes.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Iterable

import pandas as pd

FLOAT_FORMAT = "%.10g"
UMASK = os.umask(0o022)
os.umask(UMASK)  # read once (os.umask can only set it): the mode a plain write would give
DPI = 100


def linked_folder(path: Path, within: Path) -> Path | None:
    """The first folder between ``within`` and ``path`` that is a symlink, or None."""
    rel = path.parent.relative_to(within)
    for i in range(1, len(rel.parts) + 1):
        folder = within.joinpath(*rel.parts[:i])
        if folder.is_symlink():
            return folder
    return None


def write_bytes(data: bytes | Iterable[bytes], path: str | Path, within: str | Path | None = None) -> Path:
    """Write ``data`` (bytes, or chunks of them: a large file streamed) atomically, creating the
    folder: into a temporary file that ``mkstemp`` creates anew in the target folder (O_CREAT |
    O_EXCL, a random name: a link placed beforehand is never followed), then renamed over ``path``
    (a rename replaces a link there, not its target).
    ``within``: a folder ``path`` lies in (a study handed to a reviewer) whose sub-folders on the way
    to ``path`` must not be links, so nothing is written outside it through one."""
    path = Path(path)
    if within is not None and linked_folder(path, Path(within)) is not None:
        raise OSError(f"{linked_folder(path, Path(within))} is a symlink: nothing is written through it ({path})")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.writelines([data] if isinstance(data, bytes) else data)
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp makes it 0600; a plain write would not
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(text: str, path: str | Path) -> Path:
    return write_bytes(text.encode("utf-8"), path)


def json_bytes(data) -> bytes:
    """Indented JSON with sorted keys; values JSON has no type for are written as their string."""
    return (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_json(data, path: str | Path, within: str | Path | None = None) -> Path:
    return write_bytes(json_bytes(data), path, within)


def write_parquet(table: pd.DataFrame, path: str | Path) -> Path:
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return write_bytes(buffer.getvalue(), path)


def write_csv(frame: pd.DataFrame, path: str | Path, float_format: str = FLOAT_FORMAT) -> Path:
    return write_text(frame.to_csv(index=False, float_format=float_format, lineterminator="\n"), path)


def new_figure(**kwargs):
    """A matplotlib Figure (Agg canvas, no pyplot state). matplotlib is imported here, when a figure
    is drawn, not by every module that can draw one: it takes a second to load."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def png_bytes(fig, dpi: int = DPI) -> bytes:
    """A matplotlib Figure as PNG bytes: fixed dpi, no Software/date metadata."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def write_png(fig, path: str | Path, dpi: int = DPI) -> Path:
    return write_bytes(png_bytes(fig, dpi), path)
