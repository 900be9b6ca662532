"""Math-Shepherd labels (Wang et al., 2024; seed 000's annotation-free baseline), without torch.

From the prefix through step t, N completions by the generator itself; the soft label is the share
that reach the gold answer, the hard label is 1 when any does. ``math_shepherd_from_samples`` labels
the study's own traces from the continuations the pipeline already drew (rule math_shepherd, in
envs/analysis.yaml).
"""

from __future__ import annotations

import pandas as pd

from cotdyn.grading.answers import AS_WRITTEN, answer_or_none, equivalent, in_answer_form


def math_shepherd_from_samples(
    samples: pd.DataFrame,
    records: pd.DataFrame,
    benchmark: str,
    equivalence: str = "normalized",
    chains: pd.DataFrame | None = None,
    answer_form: str = AS_WRITTEN,
) -> pd.DataFrame:
    """Math-Shepherd labels of LLM traces from the continuations the pipeline already drew.

    Each (problem, prefix) row of ``samples`` is one prefix with its m completions; a completion
    reaches the gold answer when its extracted answer is equivalent to the record's gold under
    ``equivalence`` and ``answer_form`` (the variant's, as correctness uses: under ``canonical`` each
    stored answer is its canonical class). Pass the variant's samples
    (``protocol.variant_samples``: its m and endpoint). Returns one row per (problem, prefix):
    ``soft`` (share reaching gold), ``hard`` (any) and ``endpoint`` (true where the chain's own answer
    stood in for the samples).

    The endpoint, under the registered ``endpoint: continuation``: the last prefix of a finished chain
    is the whole chain, so its completion is the chain itself and what it reaches is the chain's own
    answer; the continuations drawn there are mostly empty (seed 003 section 5.2) and would score 0,
    flagging the last step of every correct chain. With ``chains`` given, every completion of that
    prefix is the chain's own answer (none when the chain gave none); a chain cut by its budget keeps
    its sampled completions. Under the other endpoints the last prefix is not the whole chain (seed 002's
    sampled last state) or is forced already (``chain_answer``): pass no chains.
    """
    gold = records.set_index("problem_id")["gold"]
    table = samples[["problem_id", "prefix", "prefix_tokens", "answer"]].copy()
    table["endpoint"] = False
    if chains is not None:
        finished = chains.loc[~chains["reference_truncated"].to_numpy(dtype=bool), ["problem_id", "chain_answer"]]
        last = table.groupby("problem_id")["prefix"].transform("max").to_numpy() == table["prefix"].to_numpy()
        own = table["problem_id"].map(finished.set_index("problem_id")["chain_answer"])
        replace = last & table["problem_id"].isin(finished["problem_id"]).to_numpy()
        table.loc[replace, "answer"] = own[replace]
        table.loc[replace, "endpoint"] = True
    scored = in_answer_form(table["answer"], benchmark, answer_form)
    hits: dict[tuple, bool] = {}  # each distinct (problem, answer) graded once: answers recur within a prefix
    keys = list(zip(table["problem_id"].tolist(), scored))
    for key in keys:
        if key not in hits:
            hits[key] = equivalent(key[1], answer_or_none(gold.get(key[0])), benchmark, equivalence, None, answer_form)
    table["hit"] = [hits[key] for key in keys]
    if table.empty:
        return pd.DataFrame([])
    # one row per (problem, prefix), by whole-column group reductions (not a loop over the groups):
    # soft is the share of hits, hard whether any hit
    groups = table.groupby(["problem_id", "prefix"], sort=True)
    hits = groups["hit"]
    return pd.DataFrame(
        {
            "prefix_tokens": groups["prefix_tokens"].first().to_numpy().astype(int),
            "n": groups.size().to_numpy(),
            "soft": (hits.sum() / groups.size()).to_numpy(dtype=float),
            "hard": hits.any().to_numpy(dtype=float),
            "endpoint": groups["endpoint"].first().to_numpy().astype(bool),
        },
        index=groups.size().index,
    ).reset_index()


def math_shepherd_csv(cells: list[tuple], protocol: dict) -> str:
    """analysis/<variant>/math_shepherd.csv as rule math_shepherd writes it, and the audit again.
    ``cells``: (cell, its answer rule, the variant's samples, the reference chains, the records) per
    cell; ``protocol``: the variant's (its equivalence, endpoint and answer form)."""
    tables = [
        math_shepherd_from_samples(
            samples,
            records,
            benchmark,
            protocol["equivalence"],
            # the last prefix is the whole chain only under the registered endpoint
            chains if protocol["endpoint"] == "continuation" else None,
            protocol["answer_form"],
        ).assign(cell=cell)
        for cell, benchmark, samples, chains, records in cells
    ]
    table = pd.concat(tables, ignore_index=True)
    return table[["cell"] + [c for c in table.columns if c != "cell"]].to_csv(index=False, float_format="%.10g")
