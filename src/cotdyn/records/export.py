"""The samples as JSON lines, beside the parquet (docs/reference.md section 3): one object per row.

For readers without a parquet library (jq, grep, a notebook's ``json.loads``), like the per-sample
logs of lm-evaluation-harness and inspect_ai. Written by rule ``samples_jsonl`` from the sealed
samples, and re-derived by the audit from the same parquet, so the two must agree byte for byte:
the bytes are a function of the parquet's rows alone (the contract's column order, UTF-8 without
escaping, ``\\n`` line ends, no NaN: a missing value is ``null``). Streamed in batches, so a
panel's samples never sit in memory twice.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from pathlib import Path
from typing import Iterator

import pyarrow.parquet as pq

from cotdyn.files.writers import write_bytes

BATCH_ROWS = 4096


def json_value(value):
    """A parquet cell as JSON takes it: NaN and infinities (which JSON has no word for) as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value


# Line breaks JSON leaves raw in a string once non-ASCII is kept, which str.splitlines (and so many
# a line reader) breaks a line at: escaped, so one row stays one line for every reader.
LINE_BREAKS_ESCAPED = tuple((c, f"\\u{ord(c):04x}") for c in "\x85\u2028\u2029")
LINE_BREAKS = str.maketrans(dict(LINE_BREAKS_ESCAPED))


# json.dumps with these arguments builds this encoder for every call; one serves every line
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _line(fields: dict) -> bytes:
    line = _ENCODER.encode(fields)
    if not line.isascii():  # the line breaks escaped are not ASCII: an ASCII line has none
        line = line.translate(LINE_BREAKS)
    return (line + "\n").encode("utf-8")


def samples_jsonl(parquet_path: str | Path) -> Iterator[bytes]:
    """Every row of a samples (or any) parquet file as a JSON line, in stored order."""
    for batch in pq.ParquetFile(parquet_path).iter_batches(batch_size=BATCH_ROWS):
        lines = _encoded_lines(batch)
        if lines is not None:
            yield from ((line + "\n").encode("utf-8") for line in lines.to_pylist())
            continue
        # json_value changes floats alone: the other columns (a row's token ids, thousands of
        # integers) go to json.dumps as they are, the same bytes without a call per value
        floats = {f.name for f in batch.schema if _holds_floats(f.type)}
        for row in batch.to_pylist():
            fields = {key: json_value(value) if key in floats else value for key, value in row.items()}
            yield _line(fields)


def _encoded_lines(batch):
    """``batch``'s lines, written by Arrow a column at a time rather than by ``_line`` a row at a
    time (the audit of a panel spent 3.6 s writing its samples so), where every column is of a type
    encoded so: integers, booleans, strings (each escaped by json's own encoder) and lists of
    integers without a null; None otherwise (floats, nested lists, two columns of one name), and
    ``_line`` writes the batch. The bytes are the same either way (tests/test_samples_export.py)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batch.num_columns or len(set(batch.schema.names)) != batch.num_columns:
        return None
    text = lambda value: pa.scalar(value, pa.large_string())  # noqa: E731  (Arrow joins one string type)
    pieces = []
    for i, (name, column) in enumerate(zip(batch.schema.names, batch.columns)):
        kind = column.type
        if pa.types.is_integer(kind):
            encoded = pc.cast(column, pa.large_string())
        elif pa.types.is_boolean(kind):
            encoded = pc.if_else(column, text("true"), text("false"))
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            encoded = pa.array(
                [None if v is None else encode_basestring(v) for v in column.to_pylist()], pa.large_string()
            )
        elif pa.types.is_list(kind) and pa.types.is_integer(kind.value_type) and not pc.list_flatten(column).null_count:
            ids = pc.binary_join(pc.cast(column, pa.list_(pa.large_string())), text(","))
            encoded = pc.binary_join_element_wise(text("["), ids, text("]"), text(""))
        else:
            return None
        pieces += [text(("{" if i == 0 else ",") + encode_basestring(name) + ":"), pc.fill_null(encoded, text("null"))]
    lines = pc.binary_join_element_wise(*pieces, text("}"), text(""))
    for char, escaped in LINE_BREAKS_ESCAPED:
        lines = pc.replace_substring(lines, char, escaped)
    return lines


def _holds_floats(kind) -> bool:
    import pyarrow as pa

    while pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        kind = kind.value_type
    return not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_boolean(kind) or pa.types.is_null(kind))  # fmt: skip


def write_samples_jsonl(parquet_path: str | Path, out: str | Path) -> Path:
    """``out``, atomically: the JSON lines of ``parquet_path``."""
    return write_bytes(samples_jsonl(parquet_path), out)
