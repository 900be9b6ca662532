"""Benchmarks as problems: the rows of a registered benchmark or a researcher's JSONL (``cotdyn.grading.registry``).

A benchmark loads through ``datasets`` at a pinned revision, or from a local JSONL (the offline
path). Either way the rows are checked against a pinned sha256 of the canonical content
(``content_sha256``: the JSON lines of ``[id, question, gold_raw]``, so the hub and a local copy
hash alike), and a mismatch stops the run with both hashes in the message. A multiple-choice
problem's question is shown with its lettered options (``cotdyn.grading.choices.show``), so they are part
of the hashed content.
"""

from __future__ import annotations

import hashlib
import json
import sys
import unicodedata
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cotdyn.files.strict import DuplicateKey, refuse_duplicates
from cotdyn.grading import choices, registry
from cotdyn.grading.answers import gold_answer


@dataclass(frozen=True)
class Problem:
    problem_id: str
    question: str
    gold_raw: str
    gold: str  # normalized
    options: tuple[str, ...] | None = None  # a multiple-choice problem's option texts


class BenchmarkError(ValueError):
    pass


def content_sha256(problems: list[Problem]) -> str:
    h = hashlib.sha256()
    for p in problems:
        h.update(json.dumps([p.problem_id, p.question, p.gold_raw], ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def _options(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(o, str) for o in value):
        raise BenchmarkError(f"{where}: options must be a non-empty list of strings, got {value!r}")
    if len(value) > len(choices.LETTERS):
        raise BenchmarkError(f"{where}: {len(value)} options, more than the {len(choices.LETTERS)} letters")
    return tuple(value)


def problems_from_rows(
    rows: list[dict], benchmark: str | registry.Benchmark, source: str, lines: list[int] | None = None
) -> list[Problem]:
    """Problems from raw rows; a missing field, an unparseable gold or a repeated id names the
    source, row (``lines``: each row's line in its file, when it came from one) and field."""
    entry = registry.REGISTRY[benchmark] if isinstance(benchmark, str) else benchmark
    fields, name = entry.fields, entry.name
    rule = entry.answer if name == registry.JSONL else name
    problems, seen, forms = [], {}, {}
    for index, row in enumerate(rows):
        where = f"{source}: line {lines[index]}" if lines else f"{source}: row {index + 1}"
        if not isinstance(row, dict):
            raise BenchmarkError(f"{where} is a JSON {type(row).__name__}, not an object")
        if any(row.get(k) != v for k, v in entry.where.items()):
            continue  # another subset (MATH algebra: another subject)
        if entry.adapt is not None:
            try:
                row = entry.adapt(row)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise BenchmarkError(f"{where}: not a {name} row ({type(e).__name__}: {e})") from None
        for role in ("question", "gold", "id", "options"):
            field = fields.get(role)
            if field is not None and field not in row:
                raise BenchmarkError(f"{where} has no field '{field}' ({name} {role})")
        options = (
            _options(row[fields["options"]], f"{where}, field '{fields['options']}'") if fields.get("options") else None
        )
        raw = str(row[fields["gold"]])
        gold = gold_answer(raw, rule, options)
        # the source's own gold field, when an adapter derived the gold from it (ARC's answerKey)
        stored = str(row[fields["gold_raw"]]) if fields.get("gold_raw") else raw
        if gold is None:
            raise BenchmarkError(
                f"{where}, field '{fields['gold']}': gold answer {raw!r} does not parse as {entry.answer}"
            )
        problem_id = str(row[fields["id"]]) if fields.get("id") else f"{name}-{index:04d}"
        if problem_id in seen:
            raise BenchmarkError(
                f"{where}, field '{fields.get('id')}': id {problem_id!r} repeats {seen[problem_id]} "
                "(every problem needs its own id: its requests and seeds are keyed by it)"
            )
        seen[problem_id] = where.removeprefix(f"{source}: ")
        normal = unicodedata.normalize("NFC", problem_id)
        if normal in forms and forms[normal] != problem_id:
            # two ids a reader cannot tell apart (cafe\u0301 and caf\u00e9): refused, not merged, so
            # the ids stay as the file writes them (the content hash and every request key read them)
            other = forms[normal]
            raise BenchmarkError(
                f"{where}, field '{fields.get('id')}': id {ascii(problem_id)} and id {ascii(other)} ({seen[other]}) "
                "differ only in their Unicode normalization and print the same; write both in one form (NFC)"
            )
        forms.setdefault(normal, problem_id)
        question = str(row[fields["question"]])
        if options is not None:
            question = choices.show(question, options)
        problems.append(Problem(problem_id, question, stored, gold, options))
    return problems


def read_jsonl_lines(path: str | Path) -> list[tuple[int, dict]]:
    """(line number, row) of each non-blank line; BenchmarkError naming the file and line of a line
    that is not UTF-8, not JSON, not a JSON object, or an object holding a key twice."""
    rows = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise BenchmarkError(
                    f"{path}: line {number} is not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line, object_pairs_hook=refuse_duplicates)
            except json.JSONDecodeError as e:
                raise BenchmarkError(f"{path}: line {number} is not JSON ({e.msg})") from None
            except DuplicateKey as e:
                raise BenchmarkError(
                    f"{path}: line {number}: key {ascii(e.key)} appears twice in one object (which value a "
                    "reader takes depends on the reader); write it once"
                ) from None
            if not isinstance(row, dict):
                raise BenchmarkError(f"{path}: line {number} is a JSON {type(row).__name__}, not an object")
            rows.append((number, row))
    return rows


def check_local_rows(spec: dict) -> int:
    """How many problems a benchmark entry's local file (``path``) holds, read as the problems job
    reads it (a line that is not a JSON object, a key twice, a missing field, a gold that does not
    parse, an id twice or twice in two Unicode normalizations: BenchmarkError naming the line), without
    its warning for an unpinned file (the problems job gives it); a pinned content sha256 the rows no
    longer have is named with both hashes. 0 for an entry without a local file. The workflow calls it
    as it is read, so a bad row or changed data stops a dry run instead of the problems job."""
    if not spec.get("path"):
        return 0
    try:
        entry = registry.entry(spec)
    except KeyError as e:
        raise BenchmarkError(e.args[0]) from None
    if entry.generated:
        return 0
    source = str(spec["path"])
    numbered = read_jsonl_lines(source)
    problems = problems_from_rows([r for _, r in numbered], entry, source, [n for n, _ in numbered])
    found, pinned = content_sha256(problems), spec.get("content_sha256")
    if pinned and found != pinned:
        raise BenchmarkError(f"{source}: content sha256 {found} differs from the pinned {pinned}")
    return len(problems)


def read_hub(repo: str, config: str | None, split: str, revision: str) -> list[dict]:
    """Rows of a hub dataset at a pinned revision (needs the network or a warm HF cache)."""
    from datasets import load_dataset

    return [dict(row) for row in load_dataset(repo, config, split=split, revision=revision)]


def _unverified(message: str) -> None:
    """Loud: the log, stderr and a Python warning all say it."""
    text = f"UNVERIFIED BENCHMARK: {message}"
    print(text, file=sys.stderr)
    warnings.warn(text, stacklevel=3)


def load_benchmark(spec: dict) -> list[Problem]:
    """Problems of one benchmark as a config's ``benchmarks`` entry describes them.

    ``spec``: ``kind`` (a registered name, ``cotdyn.grading.registry``, or ``jsonl`` with ``fields`` and
    ``answer``); ``arithmetic`` takes ``n`` and ``seed``; the others either ``path`` (local JSONL)
    or ``hub`` (laid over the declaration's ``repo``, ``config``, ``split``; the ``revision`` is the
    plan's or the config's), and ``content_sha256`` (the plan's panel pins it for a cell it names); optionally ``limit`` (the first n problems, after the hash check).
    """
    try:
        entry = registry.entry(spec)
    except KeyError as e:
        raise BenchmarkError(e.args[0]) from None
    if entry.generated:
        problems = arithmetic(spec.get("n", 20), spec.get("seed", 0))
    else:
        lines = None
        if spec.get("path"):
            source = str(spec["path"])
            numbered = read_jsonl_lines(spec["path"])
            lines, rows = [n for n, _ in numbered], [row for _, row in numbered]
        else:
            hub = {**(entry.hub or {}), **(spec.get("hub") or {})}
            if not hub.get("repo") or not hub.get("revision"):
                raise BenchmarkError(
                    f"benchmark {spec['kind']}: no pinned hub revision (neither the plan's panel nor the config "
                    "pins one); give hub.revision and content_sha256 in the config, or a local copy as path"
                )
            source = f"{hub['repo']}@{hub['revision']}"
            rows = read_hub(hub["repo"], hub.get("config"), hub["split"], hub["revision"])
        problems = problems_from_rows(rows, entry, source, lines)
        if not problems:
            subset = f" matching {entry.where}" if entry.where else ""
            raise BenchmarkError(f"{source}: no problems{subset} in it ({len(rows)} rows): nothing to run")
        found, pinned = content_sha256(problems), spec.get("content_sha256")
        if pinned and found != pinned:
            raise BenchmarkError(f"{source}: content sha256 {found} differs from the pinned {pinned}")
        if not pinned:
            _unverified(f"{source} ({spec['kind']}): no content sha256 is pinned; found {found}")
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


PROBLEM_COLUMNS = ["problem_id", "question", "gold_raw", "gold"]


def problems_table(problems: list[Problem]):
    """problems/<benchmark>.parquet; the ``options`` column only for a multiple-choice benchmark,
    so the tables of the other benchmarks keep their bytes."""
    import pandas as pd

    columns = PROBLEM_COLUMNS + (["options"] if any(p.options for p in problems) else [])
    rows = [{**asdict(p), "options": list(p.options) if p.options else None} for p in problems]
    return pd.DataFrame(rows, columns=columns)


def problems_from_table(table) -> list[Problem]:
    """The problems of a problems table (``problems_table``'s inverse)."""
    options = table["options"] if "options" in table.columns else [None] * len(table)
    return [
        Problem(r.problem_id, r.question, r.gold_raw, r.gold, tuple(o) if o is not None else None)
        for r, o in zip(table.itertuples(), options)
    ]
