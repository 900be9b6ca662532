"""The one check that a table has the columns a step reads, and the raw tables' records contract.

``CHAINS_COLUMNS`` and ``SAMPLES_COLUMNS`` are the columns of a reference chains file and of a
continuations file, in the order generation writes them (``cotdyn.generation.requests``), each with
its kind: ``string``, ``int``, ``bool``, ``int_list`` (token ids); a ``?`` marks a column that holds
null where no answer was read. The audit checks a raw file's parquet schema against them before it
reads a row (``cotdyn.audit.bounds.contract_problem``).
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

CHAINS_COLUMNS = {
    "problem_id": "string",
    "gold": "string",
    "prompt_ids": "int_list",
    "token_ids": "int_list",
    "text": "string",
    "finish_reason": "string",
    "reference_tokens": "int",
    "reference_truncated": "bool",
    "chain_answer": "string?",
    "chain_status": "string",
}
SAMPLES_COLUMNS = {
    "problem_id": "string",
    "prefix": "int",
    "prefix_tokens": "int",
    "raw_units": "int",
    "sample": "int",
    "seed": "int",
    "text": "string",
    "token_ids": "int_list",
    "finish_reason": "string",
    "hit_budget": "bool",
    "answer": "string?",
    "status": "string",
}
# each raw file's name -> its contract
RAW_CONTRACTS = {"chains.parquet": CHAINS_COLUMNS, "samples.parquet": SAMPLES_COLUMNS}


def require_columns(frame: pd.DataFrame, columns: Iterable[str], source: str) -> None:
    """Raise naming ``source`` and every missing column (and the columns it does have)."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        have = ", ".join(sorted(map(str, frame.columns)))
        raise ValueError(f"{source}: missing column(s) {', '.join(missing)} (has: {have})")
