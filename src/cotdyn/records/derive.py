"""The I/O shell around ``cotdyn.records.table``: read a cell's chains and samples, write its records
and summary (atomically, through ``cotdyn.files.writers``)."""

from __future__ import annotations

import pandas as pd

from cotdyn.files.writers import write_json, write_parquet
from cotdyn.records import table as R


def derive_records(
    chains_path,
    samples_path,
    protocol: dict,
    exclusion: dict,
    benchmark: str,
    cell: str,
    records_out,
    summary_out,
    m: int | None = None,
    groups: dict | None = None,
    cut_answers: str = "keep",
    problems_path=None,
    signals=(),
) -> pd.DataFrame:
    """Records and summary.json of one cell and variant; ``groups``: the plan's ``analysis.groups``
    (its min_group_size decides where the summary's gap_pp is null, as H1's is); ``cut_answers``:
    ``no_answer`` reads the answers of continuations cut by their budget as none (a sensitivity variant);
    ``problems_path``: the cell's problems table, whose ``gold_raw`` math-verify reads; ``signals``: the
    plugin signals the config names."""
    chains, samples = pd.read_parquet(chains_path), pd.read_parquet(samples_path)
    if cut_answers == "no_answer":
        samples = R.without_cut_answers(samples)
    elif cut_answers != "keep":
        raise ValueError(f"cut_answers '{cut_answers}' (known: keep, no_answer)")
    gold_raw = None
    if problems_path is not None:
        problems = pd.read_parquet(problems_path, columns=["problem_id", "gold_raw"])
        gold_raw = dict(zip(problems["problem_id"], problems["gold_raw"]))
    records = R.records_table(chains, samples, protocol, exclusion, benchmark, cell, m, gold_raw, signals)
    write_parquet(records, records_out)
    summary = {
        "cell": cell,
        **R.cell_summary(
            records,
            samples[samples["sample"] < (m or protocol["m"])],
            (groups or {}).get("min_group_size"),
        ),
    }
    write_json(summary, summary_out)
    return records
