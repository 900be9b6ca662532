"""Every output file a study writes goes through here: parquet, JSON, CSV, text and PNG.

Each writer writes to a temporary name and renames it into place, so a killed job never leaves a
torn file, and writes byte-stable content: sorted JSON keys, a fixed float format and ``\\n``
line ends in CSV, PNGs at a fixed dpi without the Software stamp. Equal data give equal bytes.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd

FLOAT_FORMAT = "%.10g"
DPI = 100


def write_bytes(data: bytes, path: str | Path) -> Path:
    """Write ``data`` atomically (temporary name, then rename), creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def write_text(text: str, path: str | Path) -> Path:
    return write_bytes(text.encode("utf-8"), path)


def json_bytes(data) -> bytes:
    """Indented JSON with sorted keys; values JSON has no type for are written as their string."""
    return (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_json(data, path: str | Path) -> Path:
    return write_bytes(json_bytes(data), path)


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
