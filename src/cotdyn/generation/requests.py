"""The generation requests of one cell and the tables of what came back, as pure steps over plain tables (seed 003 sections 2-3).

1. ``reference_requests``: one reference chain per problem (all in one batched phase).
2. ``chains_table``: the chains with their own answers, truncation flags and token counts.
3. ``prefix_plan``: the prefixes of every chain, as token counts (segmentation or checkpoints).
4. ``continuation_requests``: m continuations per (problem, prefix), all in one batched phase.
5. ``samples_table``: every continuation's text, ids, answer and parse status.

Records are derived from these two tables in ``cotdyn.records.table``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from cotdyn.dataset.benchmarks import Problem
from cotdyn.files.columns import CHAINS_COLUMNS, SAMPLES_COLUMNS
from cotdyn.generation.backends.base import Completion, Request, Sampling
from cotdyn.grading import answers
from cotdyn.protocol import answer_cut, segment
from cotdyn.protocol.prompts import prefix_ids
from cotdyn.protocol.seeds import request_seed, served_seed

Decode = Callable[[Sequence[int]], str]


def _sampling(protocol: dict, phase: str) -> Sampling:
    return Sampling(
        protocol[f"{phase}_temperature"],
        protocol[f"{phase}_max_tokens"],
        protocol["top_p"],
        protocol["top_k"],
        protocol["repetition_penalty"],
    )


def reference_sampling(protocol: dict) -> Sampling:
    return _sampling(protocol, "reference")


def continuation_sampling(protocol: dict) -> Sampling:
    return _sampling(protocol, "continuation")


def reference_requests(problems: list[Problem], prompts: list[list[int]], protocol: dict, cell: str) -> list[Request]:
    sampling = reference_sampling(protocol)
    return [
        Request(
            tuple(ids),
            1,
            sampling,
            request_seed(protocol["seed"], cell, p.problem_id, 0, "reference", protocol.get("time_lock")),
            role="reference",
        )
        for p, ids in zip(problems, prompts)
    ]


def chains_table(
    problems: list[Problem], prompts: list[list[int]], completions: list[list[Completion]], benchmark: str
) -> pd.DataFrame:
    rows = []
    for problem, prompt, (chain,) in zip(problems, prompts, completions):
        truncated = chain.finish_reason == "length"
        own = (
            answers.Extraction(None, answers.TRUNCATED)
            if truncated
            else answers.extract(chain.text, benchmark, problem.options)
        )
        rows.append(
            {
                "problem_id": problem.problem_id,
                "gold": problem.gold,
                "prompt_ids": list(prompt),
                "token_ids": list(chain.token_ids),
                "text": chain.text,
                "finish_reason": chain.finish_reason,
                "reference_tokens": len(chain.token_ids),
                "reference_truncated": truncated,
                "chain_answer": own.answer,
                "chain_status": own.status,
            }
        )
    return pd.DataFrame(rows, columns=list(CHAINS_COLUMNS))  # the records contract (cotdyn.files.columns)


def prefix_plan(chains: pd.DataFrame, protocol: dict, decode: Decode, benchmark: str | None = None) -> pd.DataFrame:
    """One row per (problem, prefix k): the prefix's token count and the chain's raw unit count.

    With ``endpoint: reasoning`` (seed 002 Def. 1) every chain is first cut before its final-answer
    statement (``answer_cut``, which needs the ``benchmark``), so its last prefix is the reasoning
    alone and the last state is sampled from it.
    """
    reasoning = protocol["endpoint"] == "reasoning"
    if reasoning and benchmark is None:
        raise ValueError("prefix_plan: endpoint 'reasoning' needs the benchmark to find the final-answer statement")
    rows = []
    for chain in chains.itertuples():
        ids, text = _ints(chain.token_ids), chain.text
        if reasoning:
            answered = answers.answer_or_none(chain.chain_answer) is not None and not bool(chain.reference_truncated)
            ids = ids[: answer_cut.reasoning_tokens(ids, decode, benchmark, answered)]
            text = decode(ids)
        if protocol["checkpoints"] == "tokens":
            counts = segment.checkpoints(len(ids), protocol["checkpoint_stride"])
            raw_units = len(counts) - 1
        else:
            counts, raw_units = segment.segment(text, ids, decode, protocol["segmentation"], protocol["cap"])
        rows += [
            {"problem_id": chain.problem_id, "prefix": k, "prefix_tokens": n, "raw_units": raw_units}
            for k, n in enumerate(counts)
        ]
    return pd.DataFrame(rows, columns=["problem_id", "prefix", "prefix_tokens", "raw_units"])


def continuation_requests(
    chains: pd.DataFrame, plan: pd.DataFrame, protocol: dict, cell: str, n: int | None = None
) -> list[Request]:
    """m continuations of every prefix (``n`` overrides m, e.g. N = 20 sampled once for the m sweep)."""
    sampling = continuation_sampling(protocol)
    ids = {c.problem_id: (_ints(c.prompt_ids), _ints(c.token_ids)) for c in chains.itertuples()}
    requests = []
    for row in plan.itertuples():
        prompt, chain = ids[row.problem_id]
        seed = request_seed(
            protocol["seed"], cell, row.problem_id, row.prefix_tokens, "continuation", protocol.get("time_lock")
        )
        requests.append(Request(prefix_ids(prompt, chain, row.prefix_tokens), n or protocol["m"], sampling, seed))
    return requests


def _ints(ids) -> list[int]:
    """Token ids read back from parquet arrive as numpy arrays; requests hold plain ints."""
    return np.asarray(ids, dtype=np.int64).tolist()


def samples_table(
    plan: pd.DataFrame,
    requests: list[Request],
    completions: list[list[Completion]],
    benchmark: str,
    options: dict[str, tuple[str, ...]] | None = None,
    seeds_honoured: int | None = None,
) -> pd.DataFrame:
    """``options``: each multiple-choice problem's option texts, so a choice named by its text counts;
    ``seeds_honoured``: the backend's sampler's seed range, into which each sample's seed was sent
    reduced (cotdyn.protocol.seeds.served_seed): the seed recorded is the seed used."""
    rows = []
    for row, request, samples in zip(plan.itertuples(), requests, completions):
        for j, c in enumerate(samples):
            found = answers.extract(c.text, benchmark, (options or {}).get(row.problem_id))
            rows.append(
                {
                    "problem_id": row.problem_id,
                    "prefix": row.prefix,
                    "prefix_tokens": row.prefix_tokens,
                    "raw_units": row.raw_units,
                    "sample": j,
                    "seed": served_seed(request.seed + j, seeds_honoured),
                    "text": c.text,
                    "token_ids": list(c.token_ids),
                    "finish_reason": c.finish_reason,
                    # cut by its budget: its last number may be an intermediate value (records count
                    # the answers that came from such continuations, cut_answer_share)
                    "hit_budget": c.finish_reason == "length",
                    "answer": found.answer,
                    "status": found.status,
                }
            )
    return pd.DataFrame(rows, columns=list(SAMPLES_COLUMNS))
