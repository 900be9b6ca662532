"""Bounds on what one raw file of a study can make the audit do (docs/tamper-evidence.md, "Threat model").

A raw file (chains.parquet, samples.parquet) is checked before it is parsed: a plain file (no
link), its size, then its parquet footer alone (rows, the columns the audit reads, the size its
columns take decompressed and how far they decompress, and what they decode to: a dictionary's
entries once per row), its columns against the records contract, and its text column (a text
longer than any generation writes is refused), then its seal's hash. Only then are its rows read. Each refusal names the file and
the bound. A file whose hash differs from its seal but that keeps within the bounds is still read:
the audit names the rows that changed.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cotdyn.files.columns import RAW_CONTRACTS
from cotdyn.provenance.seal import SealError, file_sha256, read_seal

MAX_FILE_BYTES = 4 << 30  # a raw file on disk
MAX_UNCOMPRESSED_BYTES = 8 << 30  # its columns decompressed, as its footer says
MAX_DECODED_BYTES = 8 << 30  # its columns decoded (a dictionary's entries once per row): what pandas holds
MAX_RATIO = 100  # decompressed / compressed: pandas' snappy reaches about 20 on repetitive text
MAX_ROWS = 50_000_000
MAX_TEXT_CHARS = 200_000  # one chain or continuation: some 50,000 tokens, beyond every budget
COLUMNS = ("text",)  # what every raw table holds and the audit reads


def bound(name: str) -> str:
    """A bound as a refusal names it: the constant of this module and its value."""
    return f"{name} = {globals()[name]} in cotdyn.audit.bounds"


def footer_problem(path: Path) -> str | None:
    """What the parquet footer of ``path`` shows beyond the bounds, or None; reads no row."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
        return f"not a parquet file ({type(e).__name__})"
    names = set(meta.schema.names)
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        return f"has no column {', '.join(missing)} (a raw table holds each row's text)"
    if meta.num_rows > MAX_ROWS:
        return f"{meta.num_rows} rows, more than the audit reads ({bound('MAX_ROWS')})"
    chunks = [meta.row_group(g).column(c) for g in range(meta.num_row_groups) for c in range(meta.num_columns)]
    plain = sum(c.total_uncompressed_size for c in chunks)
    packed = max(1, sum(c.total_compressed_size for c in chunks))
    if plain > MAX_UNCOMPRESSED_BYTES:
        return f"decompresses to {plain} bytes, more than the audit reads ({bound('MAX_UNCOMPRESSED_BYTES')})"
    if plain > MAX_RATIO * packed:
        fold = f"decompresses {plain // packed}-fold ({packed} bytes to {plain})"
        return f"{fold}; generation output does not exceed {MAX_RATIO}-fold ({bound('MAX_RATIO')})"
    return decoded_problem(path, MAX_DECODED_BYTES, "MAX_DECODED_BYTES")


def decoded_size(path: Path) -> tuple[int, int]:
    """(bytes, longest value) of the parquet file's columns once decoded, found before any column is
    decoded. A dictionary-encoded text column decompresses to its dictionary and indices, which the
    footer's sizes count, but decodes to one copy of its entry per row: one 150,000-character text
    in 400,000 rows is a 17 MB file that pandas decodes to 60 GB. Such a column chunk is read as
    pyarrow holds it (dictionary and indices, no larger than its pages) and its decoded bytes summed
    from its entries' lengths; every other chunk decodes to about its uncompressed size."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    total, longest = 0, 0
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            chunk = meta.row_group(g).column(c)
            if not (chunk.physical_type == "BYTE_ARRAY" and chunk.has_dictionary_page):
                total += chunk.total_uncompressed_size
                continue
            name = chunk.path_in_schema  # a list of texts (a problem's options) is "options.list.element"
            top = name.split(".")[0]
            column = pq.ParquetFile(path, read_dictionary=[name]).read_row_group(g, columns=[top]).column(0)
            for array in column.chunks:
                while isinstance(array, (pa.ListArray, pa.LargeListArray)):  # to the texts, still encoded
                    array = array.flatten()
                if not hasattr(array, "dictionary"):  # not read as a dictionary: its size is its own
                    total += array.nbytes
                    continue
                lengths = pc.take(pc.binary_length(array.dictionary), array.indices)
                total += int(pc.sum(lengths).as_py() or 0)
                longest = max(longest, int(pc.max(lengths).as_py() or 0))
    return total, longest


def decoded_problem(path: Path, limit: int, name: str | None = None) -> str | None:
    """Why the parquet file at ``path`` is not decoded (more than ``limit`` bytes decoded, its bound
    ``name`` in this module), or None."""
    try:
        size, longest = decoded_size(path)
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
        return f"not a parquet file that can be bounded ({type(e).__name__}: {str(e)[:200]})"
    if size > limit:
        named = bound(name) if name else f"a bound of {limit}"
        return f"decodes to {size} bytes (its longest value {longest} bytes), more than the audit decodes ({named})"
    return None


def raw_file_problem(path: Path) -> str | None:
    """Why the raw file at ``path`` is not parsed (see the module docstring), or None."""
    if path.is_symlink() or not path.is_file():
        return "not a plain file: a raw file is never read through a link"
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return f"{size} bytes, more than the audit reads ({bound('MAX_FILE_BYTES')})"
    return footer_problem(path)


def seal_problem(path: Path, digest: str | None = None) -> str | None:
    """The seal check, made before the file is parsed: its seal readable and its hash equal.
    ``digest``: the file's sha256 where the audit has it already (it hashes each file once)."""
    try:
        seal = read_seal(path)
    except SealError as e:
        return str(e)
    if (digest or file_sha256(path)) != seal["sha256"]:
        return f"sha256 differs from its seal {path.with_name('seal.json').name}"
    return None


def text_problem(path: Path, rel: str) -> str | None:
    """``long_text`` of a raw file within the other bounds, from its text column alone (read by
    pyarrow, its lengths counted there), at admission: every later reader may then take the file
    as admitted, in this process or another."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        texts = pq.read_table(path, columns=["text"]).column("text")
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
        return f"not a parquet file that can be read ({type(e).__name__}: {str(e)[:200]})"
    if len(texts) and (texts.null_count or not pa_string(texts.type)):
        return f"{rel}: column text holds a value that is not a string"
    longest = int(pc.max(pc.utf8_length(texts)).as_py() or 0) if len(texts) else 0
    if longest > MAX_TEXT_CHARS:
        limit = bound("MAX_TEXT_CHARS")
        return f"{rel}: a text of {longest} characters, more than any generation writes ({limit}); not read further"
    return None


def pa_string(kind) -> bool:
    import pyarrow as pa

    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def long_text(table: pd.DataFrame, path: str) -> str | None:
    """A raw table holding a text longer than MAX_TEXT_CHARS, or a text that is not a string."""
    texts = table["text"]
    if not all(isinstance(t, str) for t in texts):
        return f"{path}: column text holds a value that is not a string"
    longest = int(texts.str.len().max()) if len(texts) else 0
    if longest > MAX_TEXT_CHARS:
        limit = bound("MAX_TEXT_CHARS")
        return f"{path}: a text of {longest} characters, more than any generation writes ({limit}); not read further"
    return None


def _kind_of(kind: str):
    """Whether a pyarrow type is of a contract's ``kind`` (cotdyn.files.columns)."""
    import pyarrow as pa

    lists = (pa.types.is_list, pa.types.is_large_list)
    return {
        "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        "int": pa.types.is_integer,
        "bool": pa.types.is_boolean,
        # a column of empty lists (every continuation empty) has no element type: pyarrow's null
        "int_list": lambda t: (
            any(f(t) for f in lists) and (pa.types.is_integer(t.value_type) or pa.types.is_null(t.value_type))
        ),
    }[kind]


def contract_problem(path: Path, contract: dict[str, str]) -> str | None:
    """How the parquet schema of ``path`` breaks the records ``contract`` (column names and kinds,
    cotdyn.files.columns: no column missing, extra or twice), or None; reads no row. A column
    of nulls (pyarrow's null type) is allowed where the contract marks it ``?`` or the file has
    no rows."""
    import pyarrow.parquet as pq

    try:
        schema, rows = pq.read_schema(path), pq.ParquetFile(path).metadata.num_rows
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
        return f"not a parquet file ({type(e).__name__})"
    names = list(schema.names)
    problems = [f"column {n} {names.count(n)} times" for n in sorted(set(names)) if names.count(n) > 1]
    problems += [f"no column {n}" for n in contract if n not in names]
    problems += [f"an extra column {n}" for n in sorted(set(names) - set(contract))]
    for name, kind in contract.items():
        if name not in names or names.count(name) > 1:
            continue
        found = schema.field(name).type
        nulls = str(found) == "null" and (kind.endswith("?") or rows == 0)
        if not nulls and not _kind_of(kind.rstrip("?"))(found):
            problems.append(f"column {name} of type {found}, not {kind.rstrip('?')}")
    if not problems:
        return None
    return f"breaks the records contract of {path.name} (cotdyn.files.columns): {'; '.join(problems)}"


def admit_raw(study_dir: Path, paths: list[str]) -> dict[str, str]:
    """Each raw file of ``paths`` the audit will not parse -> why (a bound, cotdyn.audit.bounds, or
    the records contract of its name, contract_problem); the rest may be read."""
    refused = {}
    for rel in paths:
        path = study_dir / rel
        if path.exists() or path.is_symlink():
            problem = raw_file_problem(path)
            if problem is None and path.name in RAW_CONTRACTS:
                problem = contract_problem(path, RAW_CONTRACTS[path.name])
            if problem is None:
                problem = text_problem(path, rel)
            if problem:
                refused[rel] = problem
    return refused
