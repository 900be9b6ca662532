"""The audit against the model (``cotdyn audit DIR --regenerate N|all``, docs/tamper-evidence.md).

The re-derivation and the cache check prove only that the study is consistent with itself: an
author who rewrites the cache, re-checksums its shards and reruns the rules gets a study that
passes them. The pinned model is the one anchor the author does not control, and every request is
seeded per sample, so a reviewer can draw the same requests again and compare. This module reads
the requests back from the raw files (``cotdyn.generation.sealing``, as the seal check does), picks
N of them with the reviewer's seed, spread over cells and phases, builds the study's backend from
its model entry (``cotdyn.generation.backends.make_backend``), refuses weights whose content hash
differs from the one the study recorded, generates without any cache, and compares every sample's
token ids, text and finish reason with the stored row.

``tolerance="exact"`` (the default) fails on any differing sample. ``tolerance="answers"`` is for a
backend that is not bit-reproducible (bfloat16 on a GPU): it reports the share of token-exact
requests and fails only when the regenerated answers agree with the stored ones less often than
the stored answer distribution predicts (``answer_agreement``).
"""

from __future__ import annotations

import math
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from cotdyn.audit.registration import SEEDS_VERIFIED, regenerated_lock
from cotdyn.audit.study_model import cost_line, study_model, weights_problem
from cotdyn.audit.untrusted import Admitted, Refused, admit
from cotdyn.audit.view import StudyView, study_view
from cotdyn.files.terminal import printable
from cotdyn.generation.backends.base import Request
from cotdyn.generation.sealing import chains_requests, samples_requests
from cotdyn.grading import answers
from cotdyn.plan.config import ConfigError

TOLERANCES = ("exact", "answers")
# ``--tolerance answers`` fails when fewer regenerated answers agree with the stored ones than the
# stored distribution predicts, at this one-sided significance level (normal approximation).
ANSWER_ALPHA = 0.001


@dataclass(frozen=True)
class Stored:
    """One request of the study and the rows it produced."""

    path: str  # the raw file, relative to the study
    cell: str
    phase: str  # "reference" | "continuations"
    request: Request
    rows: pd.DataFrame  # its n rows, in sample order


@dataclass
class Regeneration:
    requests: int = 0
    equal: int = 0
    differences: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # refusals: weights, model, missing files
    tolerance: str = "exact"
    answer_test: dict | None = None

    @property
    def ok(self) -> bool:
        if self.problems or self.requests == 0:
            return False
        if self.tolerance == "answers":
            return self.answer_test is None or self.answer_test["ok"]
        return self.equal == self.requests

    def summary(self) -> str:
        line = f"regenerated: {self.equal} of {self.requests} requests equal"
        if self.tolerance == "answers" and self.answer_test:
            t = self.answer_test
            line += (
                f" ({self.equal / max(self.requests, 1):.1%} token-exact); answers agreeing with the stored: "
                f"{t['agreeing']} of {t['samples']}, {t['expected']:.1f} expected from the stored answers, "
                f"one-sided p = {t['p']:.3g} (fails below {ANSWER_ALPHA})"
            )
        return line

    def lines(self) -> list[str]:
        out = [f"  problem: {p}" for p in self.problems]
        if self.tolerance == "exact":
            out += [f"  problem: regenerated sample differs: {d}" for d in self.differences]
        else:
            out += [f"  differs (within --tolerance answers): {d}" for d in self.differences[:20]]
        return out


def stored_requests(view: StudyView, raw: dict, protocols: dict[str, dict]):
    """Every request of every raw file the study holds, with its rows, as the seal check reads them;
    and each raw file not read, with why. A file the view's bounds or seal check refused
    (cotdyn.audit.view) is never parsed here either."""
    unsafe = view.refused | {p: why for p, why in view.sealed.items() if why}
    out, unread = [], {}
    for path, (cell, variant, chains) in sorted(raw.items()):
        if path in unsafe or chains in unsafe:
            unread[path] = unsafe.get(path) or f"{chains}: {unsafe[chains]}"
            continue
        if not view.holds(path) or (chains is not None and not view.holds(chains)):
            continue
        try:
            table = view.table(path)
            if chains is None:
                requests, phase = chains_requests(table, protocols[variant], cell), "reference"
            else:
                requests = samples_requests(table, view.table(chains), protocols[variant], cell)
                phase = "continuations"
        except (OSError, ValueError, KeyError, TypeError) as e:
            unread[path] = f"unreadable as a raw table: {type(e).__name__}: {printable(str(e))[:300]}"
            continue
        start = 0
        for r in requests:
            out.append(Stored(path, cell, phase, r, table.iloc[start : start + r.n]))
            start += r.n
    return out, unread


def select(items: list[Stored], count: int | None, seed: int) -> list[Stored]:
    """``count`` requests drawn with the reviewer's ``seed``, taken in turn from each (cell, phase) so
    every cell and phase is represented; all of them when ``count`` is None. In study order."""
    if count is None or count >= len(items):
        return list(items)
    rng = np.random.default_rng(seed)
    strata = defaultdict(list)
    for i, item in enumerate(items):
        strata[(item.cell, item.phase)].append(i)
    queues = [list(rng.permutation(strata[k])) for k in sorted(strata)]
    chosen: list[int] = []
    while len(chosen) < count:
        for q in queues:
            if q and len(chosen) < count:
                chosen.append(int(q.pop()))
    return [items[i] for i in sorted(chosen)]


def _ids(ids) -> tuple[int, ...]:
    return tuple(np.asarray(ids, dtype=np.int64).tolist())


def compare(item: Stored, completions) -> list[str]:
    """Each sample of ``item`` whose regenerated token ids, text or finish reason differ from its row,
    named by file, problem, prefix and sample, with both texts."""
    found = []
    for j, (row, c) in enumerate(zip(item.rows.itertuples(), completions)):
        if _ids(row.token_ids) == tuple(c.token_ids) and row.text == c.text and row.finish_reason == c.finish_reason:
            continue
        where = "reference chain" if item.phase == "reference" else f"prefix {row.prefix} ({row.prefix_tokens} tokens)"
        found.append(
            f"{item.path}: problem {row.problem_id}, {where}, sample {j}: stored {row.text!r} "
            f"({row.finish_reason}), regenerated {c.text!r} ({c.finish_reason})"
        )
    return found


def answer_agreement(pairs: list[tuple[list, list]]) -> dict:
    """Whether regenerated answers agree with the stored ones as often as the stored answers predict.

    ``pairs``: per continuation request, (stored answers, regenerated answers), sample j with sample
    j. Were both drawn from the model, sample j's two answers agree with probability sum_a q(a)^2;
    its unbiased estimate from the stored m answers is sum_a c_a (c_a - 1) / (m (m - 1)). A forger
    who moved the stored answers towards the gold raises that prediction and lowers the agreement.
    The count agreeing, against its prediction, by the normal approximation of its Poisson-binomial
    law; ``ok`` unless the one-sided p is below ``ANSWER_ALPHA``."""
    agreeing = samples = 0
    expected = variance = 0.0
    for stored, regenerated in pairs:
        m = len(stored)
        if m < 2:
            continue
        counts = Counter(stored)
        collide = sum(c * (c - 1) for c in counts.values()) / (m * (m - 1))
        agreeing += sum(a == b for a, b in zip(stored, regenerated))
        samples += m
        expected += m * collide
        variance += m * collide * (1 - collide)
    z = (agreeing - expected) / math.sqrt(variance) if variance > 0 else (0.0 if agreeing >= expected else -math.inf)
    from scipy.stats import norm

    p = float(norm.cdf(z))
    return {"agreeing": agreeing, "samples": samples, "expected": expected, "p": p, "ok": p >= ANSWER_ALPHA}


# --- the run ----------------------------------------------------------------------------------


def _golds_and_options(view: StudyView, spec) -> tuple[dict, dict]:
    from cotdyn.dataset.benchmarks import problems_from_table

    table = view.problems(spec.benchmark_key)
    problems = problems_from_table(table) if table is not None else []
    return {p.question: p.gold for p in problems}, {p.problem_id: p.options for p in problems if p.options}


def regenerate(study: Admitted, study_dir: Path, count, seed=0, tolerance="exact", model=None):
    """Regenerate ``count`` requests of the admitted study (None: all), see the module docstring."""
    view = study_view(study_dir, study.entries, list(study.raw))
    items, unread = stored_requests(view, study.raw, study.protocols)
    result = Regeneration(tolerance=tolerance)
    result.problems += [f"{printable(p)}: not regenerated: {why}" for p, why in sorted(unread.items())]
    chosen = select(items, count, seed)
    result.requests, by_cell = len(chosen), defaultdict(list)
    for item in chosen:
        by_cell[item.cell].append(item)
    # a packaged model's converted weights (half a GB for SmolLM2) go when the regeneration ends
    with tempfile.TemporaryDirectory(prefix="cotdyn-model-") as scratch:
        pairs = _regenerate_cells(study, study_dir, view, by_cell, model, Path(scratch), result)
    if tolerance == "answers":
        result.answer_test = answer_agreement(pairs)
    sys.stdout.flush()
    return result


def _regenerate_cells(study, study_dir, view, by_cell, model, scratch: Path, result: Regeneration) -> list:
    """Each cell's chosen requests drawn again and compared into ``result``; the (stored,
    regenerated) answers of the continuations, for the answer test."""
    from cotdyn.generation.backends import make_backend

    cells, protocols, pairs = study.cells, study.protocols, []
    for n, (cell, items) in enumerate(sorted(by_cell.items()), 1):
        spec = cells[cell]
        print(f"regenerate {cell} ({n}/{len(by_cell)}): {cost_line(items, spec.model)}")
        golds, options = _golds_and_options(view, spec)
        backend = make_backend(study_model(spec, protocols, model, scratch), golds, spec.answer_rule)
        described = backend.describe()
        refused = None
        for path in sorted({i.path for i in items}):
            log, revision = (study_dir / path).parent / "generation.json", view.seal(path)["model_revision"]
            refused = refused or weights_problem(described, log, revision)
        if refused:
            result.problems.append(f"cell {cell}: {refused}")
            continue
        for (path, phase), group in _groups(items).items():
            print(f"regenerate {cell}: {len(group)} requests of {path}", flush=True)
            completions = backend.generate([i.request for i in group], desc=f"regenerate {cell} {phase}")
            for item, samples in zip(group, completions):
                differs = compare(item, samples)
                result.equal += not differs
                result.differences += differs
                if phase == "continuations":
                    regenerated = [
                        answers.extract(c.text, spec.answer_rule, options.get(pid)).answer
                        for c, pid in zip(samples, item.rows["problem_id"])
                    ]
                    pairs.append((answers.answers_or_none(item.rows["answer"]), regenerated))
    return pairs


def _groups(items: list[Stored]) -> dict[tuple[str, str], list[Stored]]:
    """A cell's chosen requests by raw file: one batched call each (one sampling per call)."""
    groups = defaultdict(list)
    for item in items:
        groups[(item.path, item.phase)].append(item)
    return dict(groups)


def count_argument(value: str) -> int | None:
    """``--regenerate N|all``: a positive number of requests, or None for every one."""
    if value == "all":
        return None
    if not value.isdigit() or int(value) < 1:
        import argparse

        raise argparse.ArgumentTypeError(f"--regenerate takes a positive number of requests or 'all', not '{value}'")
    return int(value)


# What building a backend or drawing from it may raise: a model not installed, weights not found
# offline, a malformed entry; each becomes a named problem of the audit, never a traceback.
FAILURES = (ConfigError, OSError, ValueError, KeyError, TypeError, ImportError, RuntimeError)


def regenerate_into(report, study_dir, plan_path, cache, count: int | None, seed: int, tolerance: str, model=None):
    """Regenerate the audited study's requests and lay the result over ``report`` (an AuditReport):
    its model check line, and a problem for each differing sample (exact) or a failed answer test.
    The folder is admitted as the audit admits it (cotdyn.audit.untrusted) before anything is read;
    a refused folder is not regenerated (the audit's problems already name why)."""
    study_dir = Path(study_dir)
    try:
        study = admit(study_dir, plan_path, cache)
    except Refused:
        report.model_check = "regenerated: nothing (the study folder was refused)"
        return
    try:
        result = regenerate(study, study_dir, count, seed, tolerance, model)
    except FAILURES as e:
        report.problems.append(f"regeneration failed: {type(e).__name__}: {printable(str(e))[:500]}")
        report.model_check = "regenerated: nothing"
        return
    report.model_check = result.summary()
    if result.ok and report.time_lock and SEEDS_VERIFIED in report.time_lock:
        report.time_lock = regenerated_lock(report.time_lock, result.equal)
    lines = result.lines()
    report.problems += [line.removeprefix("  problem: ") for line in lines if line.startswith("  problem: ")]
    for line in lines:
        if not line.startswith("  problem: "):
            print(printable(line))
    if result.requests == 0:
        report.problems.append("regeneration: the study holds no raw files to regenerate")
    if tolerance == "answers" and result.answer_test and not result.answer_test["ok"]:
        report.problems.append(
            f"regenerated answers agree with the stored ones less than predicted: {result.summary()}"
        )
