"""Which rows changed: the audit names them when a stored file differs from its re-derivation.

A hash says that a file changed; a reviewer wants to know where. ``changed_rows`` compares two
tables (parquet or CSV) row by row, matched on their key columns, and two JSON files key by key,
and says which rows (or keys) differ and in which columns, the first few of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from cotdyn.files.strict import UntrustedFileError, read_json, regular_file
from cotdyn.grading import answers

# the columns that name a row, in the order tried: a sample, a record, a table row of one cell
KEYS = (("problem_id", "prefix", "sample"), ("cell", "problem_id"), ("problem_id",))
SHOWN = 5
MAX_COMPARED_BYTES = 256 << 20  # a derived table or JSON compared row by row: a summary is kB, records MB


def _key(frame: pd.DataFrame) -> list[str]:
    return next((list(k) for k in KEYS if set(k) <= set(frame.columns)), [])


def _read(path: Path) -> pd.DataFrame:
    """A table of the study (or its re-derivation), read once it is a regular file within the bounds
    (a FIFO never opened, a sparse or compressed giant never decoded)."""
    st = regular_file(path)
    if st.st_size > MAX_COMPARED_BYTES:
        raise UntrustedFileError(f"{path}: {st.st_size} bytes, more than the {MAX_COMPARED_BYTES} compared row by row")
    if path.suffix == ".parquet":
        from cotdyn.audit.bounds import decoded_problem

        problem = decoded_problem(path, MAX_COMPARED_BYTES)
        if problem:
            raise UntrustedFileError(f"{path}: {problem}")
        return pd.read_parquet(path)
    return pd.read_csv(path)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        return bool(a == b) if not hasattr(a, "__len__") or isinstance(a, str) else list(a) == list(b)
    except (TypeError, ValueError):
        return repr(a) == repr(b)


def _name(key: list[str], row) -> str:
    return ", ".join(f"{k}={row[k]}" for k in key) if key else f"row {row.name}"


def table_changes(stored: pd.DataFrame, derived: pd.DataFrame) -> str:
    """The rows of ``stored`` that differ from ``derived``, named by their key columns."""
    if list(stored.columns) != list(derived.columns):
        gone = [c for c in derived.columns if c not in stored.columns]
        added = [c for c in stored.columns if c not in derived.columns]
        return f"columns differ (missing: {', '.join(gone) or 'none'}; extra: {', '.join(added) or 'none'})"
    key = _key(stored)
    a = stored.set_index(key, drop=False) if key else stored
    b = derived.set_index(key, drop=False) if key else derived
    only_a = [i for i in a.index if i not in b.index]
    only_b = [i for i in b.index if i not in a.index]
    changed = []
    for i in a.index:
        if i in b.index:
            cols = [c for c in a.columns if not _same(a.loc[i, c], b.loc[i, c])]
            if cols:
                changed.append(f"{_name(key, a.loc[i])} ({', '.join(cols)})")
    parts = []
    if changed:
        more = f"; and {len(changed) - SHOWN} more" if len(changed) > SHOWN else ""
        parts.append(f"{len(changed)} of {len(a)} rows changed: " + "; ".join(changed[:SHOWN]) + more)
    if only_a:
        parts.append(f"{len(only_a)} rows not in the re-derivation")
    if only_b:
        parts.append(f"{len(only_b)} rows missing")
    if not parts and not stored.equals(derived):
        parts.append("same values, different bytes (row order or types)")
    return "; ".join(parts) or "no row differs"


def _flat(obj, prefix: str = "") -> dict[str, object]:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out |= _flat(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return {prefix: obj}


def json_changes(stored: dict, derived: dict) -> str:
    a, b = _flat(stored), _flat(derived)
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k, "<absent>") != b.get(k, "<absent>")]
    if not keys:
        return "no key differs"
    shown = [f"{k}: {a.get(k, '<absent>')!r} (re-derived {b.get(k, '<absent>')!r})" for k in keys[:SHOWN]]
    return (
        f"{len(keys)} keys changed: "
        + "; ".join(shown)
        + (f"; and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")
    )


def changed_rows(stored_path, derived_path) -> str | None:
    """What differs between a stored file and its re-derivation; None for a file type it cannot read."""
    stored_path, derived_path = Path(stored_path), Path(derived_path)
    try:
        if stored_path.suffix in (".parquet", ".csv"):
            return table_changes(_read(stored_path), _read(derived_path))
        if stored_path.suffix == ".json":  # the stored file strictly: bounded, no key twice (cotdyn.files.strict)
            stored = read_json(stored_path, max_bytes=MAX_COMPARED_BYTES)
            return json_changes(stored, json.loads(derived_path.read_text()))
    except (OSError, ValueError) as e:
        return f"could not compare the rows ({type(e).__name__}: {e})"
    return None


def changed_answers(stored: pd.DataFrame, reextracted: pd.DataFrame) -> list[str]:
    """The samples whose stored answer or status differs from the one extracted from their text."""
    key = _key(stored)
    out = []
    for (_, a), (_, b) in zip(stored.iterrows(), reextracted.iterrows()):
        if answers.answer_or_none(a["answer"]) != answers.answer_or_none(b["answer"]) or a["status"] != b["status"]:
            out.append(f"{_name(key, a)} (stored {a['answer']!r}, from its text {b['answer']!r})")
    return out
