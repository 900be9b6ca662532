"""The grading page: what a reviewer checks of the grading of one cell in a minute (issue 27).

Per cell, from its stored chains and the registered variant's samples (every text the study
graded) and its problems (the golds as written):

- ``parse_status.csv``: how many reference chains and continuations gave an answer
  (``ok``), none (``no_answer``) or were cut by their budget (``truncated``);
- ``disagreements.csv``: every (answer, gold) pair on which the registered rule (equal normalized
  answers) and math-verify (the sensitivity variant, on the answer and gold as written) disagree,
  with the tail of the first text that gave it, how many texts gave it, and both verdicts;
- ``graded_sample.csv``: a fixed-seed sample of 20 graded texts (the seed hashes the cell's name),
  with the tail of each text, what was extracted, the gold and the verdict.

``grading_page`` puts every cell's tables on one HTML page of the study report. All of it is a
pure function of the stored files, written byte-stably by ``cotdyn.files.writers``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cotdyn.files.layout import GRADING_FILES
from cotdyn.files.writers import write_csv
from cotdyn.grading import answers
from cotdyn.grading.symbolic import math_verify_verdicts
from cotdyn.report.exploratory_tables import tables_html

GRADING_TABLES = tuple(name.removesuffix(".csv") for name in GRADING_FILES)
SAMPLE_SIZE = 20
TAIL_CHARS = 200
STATUSES = (answers.OK, answers.NO_ANSWER, answers.TRUNCATED)


def tail(text: str, chars: int = TAIL_CHARS) -> str:
    """The end of a text, as a reviewer reads it: its last ``chars`` characters, '…' before when cut."""
    text = text or ""
    return text if len(text) <= chars else "…" + text[-chars:]


def graded_texts(
    chains: pd.DataFrame,
    samples: pd.DataFrame,
    problems: pd.DataFrame,
    benchmark: str,
    answer_form: str = answers.AS_WRITTEN,
    reextracted: bool = True,
) -> pd.DataFrame:
    """One row per graded text, chains first: where it stands (source, problem, prefix, sample),
    its text, stored status and answer, the answer as written (re-extracted; None throughout unless
    ``reextracted``: math-verify reads it for a boxed type only), and the gold twice: normalized, and
    as written (``answers.gold_expression``). The answer and the normalized gold are the classes of
    ``answer_form`` (the variant's; the stored ones are ``as_written``)."""
    golds = problems.set_index("problem_id")
    chain_rows = pd.DataFrame(
        {
            "source": "chain",
            "problem_id": chains["problem_id"].to_numpy(),
            "prefix": -1,
            "sample": -1,
            "text": chains["text"].to_numpy(),
            "status": chains["chain_status"].to_numpy(),
            "answer": answers.answers_or_none(chains["chain_answer"]),
        }
    )
    sample_rows = pd.DataFrame(
        {
            "source": "continuation",
            "problem_id": samples["problem_id"].to_numpy(),
            "prefix": samples["prefix"].to_numpy(),
            "sample": samples["sample"].to_numpy(),
            "text": samples["text"].to_numpy(),
            "status": samples["status"].to_numpy(),
            "answer": answers.answers_or_none(samples["answer"]),
        }
    )
    texts = pd.concat([chain_rows, sample_rows], ignore_index=True)
    # concat made None NaN; the stored as_written classes become the variant's form
    texts["answer"] = pd.Series(answers.in_answer_form(texts["answer"], benchmark, answer_form), dtype=object)
    raw = _answers_raw(texts, benchmark, _options(problems)) if reextracted else [None] * len(texts)
    texts["answer_raw"] = pd.Series(raw, dtype=object)
    gold = golds["gold"].to_dict()  # a dict, not .at per text: a panel cell grades some 35,000 texts
    problem_ids = texts["problem_id"].tolist()
    texts["gold"] = answers.in_answer_form([gold[p] for p in problem_ids], benchmark, answer_form)
    expressions = {p: answers.gold_expression(golds.at[p, "gold_raw"], benchmark) for p in golds.index}
    texts["gold_raw"] = [expressions[p] for p in problem_ids]
    return texts


def _answers_raw(texts: pd.DataFrame, benchmark: str, options: Mapping[str, Sequence[str]]) -> list[str | None]:
    """Each answered text's answer as written (re-extracted), None where it gave none. An extraction
    is a function of its text and its problem's options, so each distinct pair is extracted once
    (a continuation recurs: a simulated panel cell holds some 5 rows per distinct text)."""
    memo: dict[tuple, str | None] = {}
    raw = []
    for text, problem, answer in zip(*(texts[c].tolist() for c in ("text", "problem_id", "answer"))):
        if answer is None:
            raw.append(None)
            continue
        key = (text, options.get(problem))
        if key not in memo:
            memo[key] = answers.extract(text, benchmark, key[1]).raw
        raw.append(memo[key])
    return raw


def _options(problems: pd.DataFrame) -> dict[str, Sequence[str]]:
    if "options" not in problems.columns:
        return {}
    return {p: tuple(o) for p, o in zip(problems["problem_id"], problems["options"]) if o is not None}


def parse_status(texts: pd.DataFrame) -> pd.DataFrame:
    """Counts and shares of each parse status, for the reference chains and for the continuations."""
    rows = []
    for source in ("chain", "continuation"):
        statuses = texts.loc[texts["source"] == source, "status"]
        for status in STATUSES:
            n = int((statuses == status).sum())
            rows.append(
                {
                    "texts": source,
                    "status": status,
                    "n": n,
                    "share": n / len(statuses) if len(statuses) else float("nan"),
                }
            )
    return pd.DataFrame(rows)


_INTEGER = re.compile(r"-?\d+")


def _judged_pair(answer, gold, answer_raw, gold_raw, boxed: bool) -> tuple | bool:
    """What decides one text's math-verify verdict: a verdict (False without an answer; two integers'
    equality, which is math-verify's verdict on them, for a type not boxed), or the pair of strings
    math-verify compares (as written for a boxed type, the classes otherwise; missing: False)."""
    if answer is None:
        return False
    a, b = (answer_raw, gold_raw) if boxed else (answer, gold)
    if not boxed and a is not None and b is not None and _INTEGER.fullmatch(a) and _INTEGER.fullmatch(b):
        return int(a) == int(b)
    a, b = answers.answer_or_none(a), answers.answer_or_none(b)  # as answers.equivalent reads them
    return False if a is None or b is None else (a, b)


def _judged_pairs(texts: pd.DataFrame, benchmark: str):
    boxed = answers.answer_type(benchmark) == "boxed"
    columns = ("answer", "gold", "answer_raw", "gold_raw")
    return (_judged_pair(*row, boxed) for row in zip(*(texts[c].tolist() for c in columns)))


def symbolic_pairs(texts: pd.DataFrame, benchmark: str) -> list[tuple[str, str]]:
    """The distinct pairs of strings, in first appearance, that ``verdicts`` asks math-verify about."""
    return list(dict.fromkeys(p for p in _judged_pairs(texts, benchmark) if isinstance(p, tuple)))


def verdicts(
    texts: pd.DataFrame,
    benchmark: str,
    options: Mapping[str, Sequence[str]] | None = None,
    answer_form: str = answers.AS_WRITTEN,
) -> pd.DataFrame:
    """``texts`` with both verdicts: ``registered`` (equal normalized answers, under ``answer_form``) and ``math_verify``
    (math-verify on the answer and the gold as written, a boxed type's; the classes otherwise, as
    the records compare them). Each distinct pair is graded once; two integers, whose math-verify
    verdict is their equality, are compared without it (GSM8K's pairs, most of a panel's)."""
    options = options or {}
    judged = math_verify_verdicts(symbolic_pairs(texts, benchmark))
    registered, memo_registered = [], {}
    for problem, answer, gold in zip(*(texts[c].tolist() for c in ("problem_id", "answer", "gold"))):
        opts = options.get(problem)
        key = (problem, answer, gold) if opts else (answer, gold)
        if key not in memo_registered:
            memo_registered[key] = answers.equivalent(answer, gold, benchmark, options=opts, answer_form=answer_form)
        registered.append(memo_registered[key])
    symbolic = [p if isinstance(p, bool) else judged[p] for p in _judged_pairs(texts, benchmark)]
    return texts.assign(registered=registered, math_verify=symbolic)


def disagreements(graded: pd.DataFrame) -> pd.DataFrame:
    """Every (answer as written, gold) pair the two rules grade differently: the first text that
    gave it, how many did, and both verdicts."""
    differ = graded[graded["registered"] != graded["math_verify"]]
    columns = ["problem_id", "source", "prefix", "sample", "n_texts", "text_tail", "answer", "answer_raw",
               "gold", "gold_raw", "registered", "math_verify"]  # fmt: skip
    if differ.empty:
        return pd.DataFrame(columns=columns)
    keys = ["problem_id", "answer_raw", "gold_raw"]
    counts = differ.groupby(keys, sort=False, dropna=False).size().rename("n_texts").reset_index()
    first = differ.drop_duplicates(keys).merge(counts, on=keys, how="left")
    first = first.assign(text_tail=[tail(t) for t in first["text"]])
    return first[columns].sort_values(["problem_id", "answer_raw"], kind="stable").reset_index(drop=True)


def sample_seed(cell: str) -> int:
    """The graded sample's seed: a hash of the cell's name, so every run draws the same texts."""
    return int(hashlib.sha256(f"grading-sample:{cell}".encode()).hexdigest()[:8], 16)


def graded_sample(graded: pd.DataFrame, cell: str, size: int = SAMPLE_SIZE) -> pd.DataFrame:
    """A fixed-seed sample of ``size`` graded texts (all of them when fewer), in the texts' order."""
    rng = np.random.default_rng(sample_seed(cell))
    chosen = np.sort(rng.choice(len(graded), size=min(size, len(graded)), replace=False))
    picked = graded.iloc[chosen]
    return pd.DataFrame(
        {
            "problem_id": picked["problem_id"].to_numpy(),
            "source": picked["source"].to_numpy(),
            "prefix": picked["prefix"].to_numpy(),
            "sample": picked["sample"].to_numpy(),
            "text_tail": [tail(t) for t in picked["text"]],
            "status": picked["status"].to_numpy(),
            "answer": picked["answer"].to_numpy(),
            "gold": picked["gold"].to_numpy(),
            "correct": picked["registered"].to_numpy(),
        }
    )


def grading_tables(
    chains: pd.DataFrame,
    samples: pd.DataFrame,
    problems: pd.DataFrame,
    benchmark: str,
    cell: str,
    answer_form: str = answers.AS_WRITTEN,
) -> dict[str, pd.DataFrame]:
    """The three tables of one cell (``GRADING_TABLES``), graded under the variant's ``answer_form``.
    Math-verify reads the answers as written for a boxed
    type only; another type's are re-extracted for the rows the disagreements show, and only those."""
    boxed = answers.answer_type(benchmark) == "boxed"
    texts = graded_texts(chains, samples, problems, benchmark, answer_form, reextracted=boxed)
    graded = verdicts(texts, benchmark, _options(problems), answer_form)
    if not boxed:
        differ = (graded["registered"] != graded["math_verify"]).to_numpy()
        shown = _answers_raw(graded[differ], benchmark, _options(problems))
        graded.loc[differ, "answer_raw"] = pd.Series(shown, index=graded.index[differ], dtype=object)
    return {
        "parse_status": parse_status(texts),
        "disagreements": disagreements(graded),
        "graded_sample": graded_sample(graded, cell),
    }


def write_grading(tables: Mapping[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    return [write_csv(tables[name], out / f"{name}.csv") for name in GRADING_TABLES]


def grading_page(cell_tables: Mapping[str, Mapping[str, pd.DataFrame]], variant: str) -> str:
    """One HTML page of every cell's grading tables (the CSVs' content), cells in the given order."""
    sections = {}
    for cell, tables in cell_tables.items():
        n = len(tables["disagreements"])
        sections[f"{cell}: parse status"] = tables["parse_status"]
        sections[f"{cell}: {n} pairs graded differently by the registered rule and math-verify"] = tables[
            "disagreements"
        ]
        sections[f"{cell}: {SAMPLE_SIZE} graded texts (fixed seed)"] = tables["graded_sample"]
    return tables_html(sections, f"Grading: reference chains and the {variant} variant's continuations")


def read_grading(folder: str | Path) -> dict[str, pd.DataFrame]:
    """One cell's tables as ``write_grading`` wrote them (text columns stay text)."""
    return {
        name: pd.read_csv(Path(folder) / f"{name}.csv", dtype=str, keep_default_na=False) for name in GRADING_TABLES
    }
