"""Benchmarks: GSM8K test, MATH-500 test, and a generated arithmetic benchmark.

GSM8K and MATH-500 load through ``datasets`` at a pinned revision, or from a local JSONL (the
offline path). Either way the rows are checked against a pinned sha256 of the canonical content
(``content_sha256``: the JSON lines of ``[id, question, gold_raw]``, so the hub and a local copy
hash alike), and a mismatch stops the run with both hashes in the message.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .answers import gold_answer

# Fields of each benchmark's rows: question, gold, and how a row's stable id is made.
FIELDS = {
    "gsm8k": {"question": "question", "gold": "answer", "id": None},
    "math500": {"question": "problem", "gold": "answer", "id": "unique_id"},
}


@dataclass(frozen=True)
class Problem:
    problem_id: str
    question: str
    gold_raw: str
    gold: str  # normalized


class BenchmarkError(ValueError):
    pass


def content_sha256(problems: list[Problem]) -> str:
    h = hashlib.sha256()
    for p in problems:
        h.update(json.dumps([p.problem_id, p.question, p.gold_raw], ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def problems_from_rows(rows: list[dict], benchmark: str, source: str) -> list[Problem]:
    """Problems from raw rows; a missing field or an unparseable gold names the source and row."""
    fields = FIELDS[benchmark]
    problems = []
    for index, row in enumerate(rows):
        for role in ("question", "gold", "id"):
            name = fields[role]
            if name is not None and name not in row:
                raise BenchmarkError(f"{source}: row {index + 1} has no field '{name}' ({benchmark} {role})")
        gold = gold_answer(str(row[fields["gold"]]), benchmark)
        if gold is None:
            raise BenchmarkError(f"{source}: row {index + 1}: gold answer {row[fields['gold']]!r} does not parse")
        problem_id = str(row[fields["id"]]) if fields["id"] else f"{benchmark}-{index:04d}"
        problems.append(Problem(problem_id, str(row[fields["question"]]), str(row[fields["gold"]]), gold))
    return problems


def read_jsonl(path: str | Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise BenchmarkError(f"{path}: line {number} is not JSON ({e.msg})") from None
    return rows


def read_hub(repo: str, config: str | None, split: str, revision: str) -> list[dict]:
    """Rows of a hub dataset at a pinned revision (needs the network or a warm HF cache)."""
    from datasets import load_dataset

    return [dict(row) for row in load_dataset(repo, config, split=split, revision=revision)]


def load_benchmark(spec: dict) -> list[Problem]:
    """Problems of one benchmark as a config's ``benchmarks`` entry describes them.

    ``spec``: ``kind`` (gsm8k | math500 | arithmetic); for the real benchmarks either ``path``
    (local JSONL) or ``hub`` (``repo``, ``config``, ``split``, ``revision``), and
    ``content_sha256``; optionally ``limit`` (the first n problems, after the hash check).
    """
    kind = spec["kind"]
    if kind == "arithmetic":
        problems = arithmetic(spec.get("n", 20), spec.get("seed", 0))
    elif kind in FIELDS:
        if spec.get("path"):
            source = str(spec["path"])
            rows = read_jsonl(spec["path"])
        else:
            hub = spec["hub"]
            source = f"{hub['repo']}@{hub['revision']}"
            rows = read_hub(hub["repo"], hub.get("config"), hub["split"], hub["revision"])
        problems = problems_from_rows(rows, kind, source)
        found, pinned = content_sha256(problems), spec.get("content_sha256")
        if pinned and found != pinned:
            raise BenchmarkError(f"{source}: content sha256 {found} differs from the pinned {pinned}")
    else:
        raise BenchmarkError(f"unknown benchmark kind '{kind}' (known: gsm8k, math500, arithmetic)")
    return problems[: spec["limit"]] if spec.get("limit") else problems


# --- the generated benchmark of the embedded default ---

_NAMES = ["Ava", "Ben", "Cleo", "Dev", "Emma", "Finn", "Gia", "Hugo", "Iris", "Jack"]
_THINGS = ["apples", "books", "coins", "marbles", "pencils", "stamps", "cookies", "shells"]


def arithmetic(n: int, seed: int) -> list[Problem]:
    """Seeded word problems of one or two operations on small numbers, with exact integer answers.

    Easy on purpose: the embedded 135M-parameter model must get a measurable share right.
    """
    rng = np.random.default_rng(seed)
    problems = []
    for index in range(n):
        name, thing = _NAMES[rng.integers(len(_NAMES))], _THINGS[rng.integers(len(_THINGS))]
        a, b = int(rng.integers(2, 10)), int(rng.integers(1, 6))
        form = int(rng.integers(3))
        if form == 0:
            question, answer = (
                f"{name} has {a} {thing}. {name} gets {b} more {thing}. How many {thing} does {name} have now?",
                a + b,
            )
        elif form == 1:
            a = a + b
            question, answer = (
                f"{name} has {a} {thing}. {name} gives away {b} {thing}. How many {thing} does {name} have left?",
                a - b,
            )
        else:
            c = int(rng.integers(1, 4))
            question = (
                f"{name} has {a} {thing}. {name} buys {b} more and then gives away {c}. "
                f"How many {thing} does {name} have now?"
            )
            answer = a + b - c
        problems.append(Problem(f"arithmetic-{index:04d}", question, str(answer), str(answer)))
    return problems


def problems_table(problems: list[Problem]):
    import pandas as pd

    return pd.DataFrame([asdict(p) for p in problems], columns=["problem_id", "question", "gold_raw", "gold"])
