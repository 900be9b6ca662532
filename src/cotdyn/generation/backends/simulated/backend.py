"""``SimulatedBackend``: latent chains drawn from the planted truth, written and continued as text."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Sequence

from cotdyn.generation.backends.base import Completion, Request, Sampling
from cotdyn.generation.backends.simulated.planted import Planted, _hit, _Latent, _rng, _uniform, revision
from cotdyn.generation.backends.simulated.text import (
    _FILLER,
    _FILLER_NON_ASCII,
    _FINAL,
    _NOT_SURE,
    _answer_text,
    _latex_form,
    _plan,
    _shift,
    _shift_letter,
    _spelled_step,
    _step,
)
from cotdyn.generation.backends.simulated.tokenizer import ByteTokenizer
from cotdyn.grading.answers import answer_type

_MAX_DISTINCT = 5


class SimulatedBackend:
    name = "simulated"

    def __init__(self, golds: dict[str, str], benchmark: str, planted: Planted | None = None):
        """``golds`` maps question text to gold answer: the simulator's oracle."""
        self.golds = golds
        self.benchmark = benchmark
        # a multiple-choice answer is a letter: a wrong one is another letter, not "B+3"
        self._shift = _shift_letter if answer_type(benchmark) == "choice" else _shift
        self.planted = planted or Planted()
        self.tokenizer = ByteTokenizer()
        self.model_revision = revision(self.planted)

    def generate(self, requests: Sequence[Request], desc: str = "", done=None, on_done=None) -> list[list[Completion]]:
        """Each request answered alone, so ``on_done`` hears of each request's new samples as it is answered."""
        done = done or {}
        out = []
        for i, r in enumerate(requests):
            fresh = [(i, j, self._complete(r, j)) for j in range(r.n) if (i, j) not in done]
            if fresh and on_done is not None:
                on_done(fresh)
            drawn = {j: c for _, j, c in fresh}
            out.append([done[(i, j)] if (i, j) in done else drawn[j] for j in range(r.n)])
        return out

    def effective_sampling(self, sampling: Sampling) -> dict:
        return sampling.as_dict()

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model_id": "simulated",
            "revision": self.model_revision,
            "planted": asdict(self.planted),
            "dtype": None,
            "device": "cpu",
        }

    # --- the planted model ---
    def _complete(self, request: Request, j: int) -> Completion:
        head, _, prefix = self.tokenizer.decode(request.prompt_ids).partition("\n<|assistant|>\n")
        question = head.split("<|user|>\n", 1)[-1]
        if question not in self.golds:
            raise KeyError(f"simulated backend: question not in its oracle: {question[:60]!r}")
        gold = self.golds[question]
        if request.role == "reference":
            return self._reference(question, gold, request)
        return self._continuation(question, gold, prefix, request.seed + j, j)

    def _reference(self, question: str, gold: str, request: Request) -> Completion:
        p = self.planted
        rng = _rng("reference", question, request.seed)
        n_units = max(1, int(round(rng.lognormal(math.log(p.units_median), p.units_sigma))))
        start = int(rng.integers(10, 99))
        filler = _FILLER_NON_ASCII if _hit(p.non_ascii_rate, "non-ascii", question, request.seed) else _FILLER
        fault = self._chain_fault(question, request.seed)
        budget = request.sampling.max_tokens
        if fault == "unanswered":
            text = (
                "\n\n".join(self._unit(_spelled_step(i, n_units, start), filler) for i in range(1, n_units + 1))
                + _NOT_SURE
            )
        else:
            latent = self._latent(question, start, n_units, gold)
            answer = gold if latent.correct else latent.wrong
            if _hit(p.off_mode_share, "off-mode", question, request.seed):
                answer = latent.wrong if latent.correct else gold
            final = self._written(answer, "latex", question, request.seed)
            steps = [self._unit(_step(i, n_units, start), filler) for i in range(1, n_units + 1)]
            text = "\n\n".join(steps) + f"\n{_FINAL} {final}."
            if fault == "cut":
                text = self._run_on(n_units, start, filler, budget) or text
        ids = self.tokenizer.encode(text)
        if len(ids) > budget:
            ids = ids[:budget]
            return Completion(tuple(ids), self.tokenizer.decode(ids), "length")
        return Completion(tuple(ids), text, "stop")

    def _unit(self, step: str, filler: str) -> str:
        """A step padded with filler to about ``unit_chars`` characters, ending in a period."""
        return (step + filler * 3)[: max(len(step), self.planted.unit_chars - 1)] + "."

    def _chain_fault(self, question: str, seed: int) -> str | None:
        p = self.planted
        if p.unanswered_rate + p.cut_rate == 0:
            return None
        u = _uniform("chain fault", question, seed)
        if u < p.unanswered_rate:
            return "unanswered"
        return "cut" if u < p.unanswered_rate + p.cut_rate else None

    def _run_on(self, n_units: int, start: int, filler: str, budget: int) -> str | None:
        """A chain that keeps stepping until its budget ends two digits into a number.

        Whole steps are written while they leave room for one more step opening; that last step
        is padded so that its number starts two bytes before the budget. None when the budget
        cannot hold even the first step (the chain is then written, and cut, as usual).
        """
        room = 64  # bytes kept free for the last step's opening, padding and first digits
        units, size, i = [], -2, 1  # size: bytes of the units joined by blank lines
        while True:
            unit = self._unit(_step(i, n_units, start), filler)
            if size + 2 + len(unit.encode()) + room > budget:
                break
            units.append(unit)
            size, i = size + 2 + len(unit.encode()), i + 1
        if not units:
            return None
        head = "\n\n".join(units)
        opening, closing = f"\n\nStep {i}:", ", so the running value is "
        pad = budget - 2 - len((head + opening + closing).encode())
        padding = (_FILLER * (pad // len(_FILLER) + 1))[:pad]  # ASCII, so characters are bytes
        return head + opening + padding + closing + str((start + 3 * i) * 1009) + "."

    def _latent(self, question: str, start: int, n_units: int, gold: str) -> _Latent:
        """The chain's planted truth, keyed by what its first unit states (so that a prefix,
        which is all a continuation request shows, determines it)."""
        p = self.planted
        rng = _rng("latent", question, start, n_units)
        smooth = bool(rng.random() < p.monotone_share) or n_units < 3
        correct = bool(rng.random() < (p.accuracy_monotone if smooth else p.accuracy_nonmonotone))
        late_switch = (not correct) and bool(rng.random() < p.late_switch_share)
        d0 = self._prior_distinct(question)
        distinct = [max(1, d0 - (u * d0) // n_units) for u in range(n_units)]
        nulls: set[int] = set()
        if smooth:
            nulls = {u for u in range(1, n_units) if rng.random() < p.null_rate}
        else:
            reachable = list(range(1, min(n_units, 8)))
            n_rises = min(len(reachable), int(rng.integers(1, 4)))
            for u in sorted(int(x) for x in rng.choice(reachable, size=n_rises, replace=False)):
                distinct[u] = min(_MAX_DISTINCT, distinct[u - 1] + 1 + int(rng.integers(0, 2)))
        wrong = self._shift(gold, int(rng.integers(1, 9)) * (1 if rng.random() < 0.5 else -1))
        return _Latent(smooth, correct, late_switch, tuple(distinct), frozenset(nulls), wrong)

    @staticmethod
    def _prior_distinct(question: str) -> int:
        return int(_rng("prior", question).integers(2, _MAX_DISTINCT))

    def _continuation(self, question: str, gold: str, prefix: str, seed: int, j: int) -> Completion:
        """Sample j (seeded ``seed``) of a continuation of ``prefix``."""
        if _FINAL in prefix:  # a finished chain continues with nothing
            return Completion((), "", "stop")
        if _hit(self.planted.empty_rate, "empty", question, prefix, seed):
            return Completion((), "", "stop")
        key = (question, prefix, seed)
        pieces = prefix.split("\n\n")
        plan = _plan(pieces[0])
        complete = len(pieces) - (0 if pieces[-1].rstrip().endswith(".") else 1)
        if not plan or complete < 1:  # the empty prefix: guesses from the question, never gold
            d = self._prior_distinct(question)
            return self._say([self._shift(gold, 7 * c) for c in range(1, d + 1)], j, key)
        n_units, start = plan
        latent = self._latent(question, start, n_units, gold)
        u = min(complete, n_units - 1)
        if u in latent.nulls:
            return self._say(None, j, key)
        switched_yet = u >= 0.7 * n_units
        dominant = gold if latent.correct or (latent.late_switch and not switched_yet) else latent.wrong
        return self._say([dominant] + [self._shift(dominant, 11 * c) for c in range(1, latent.distinct[u])], j, key)

    def _say(self, clusters: list[str] | None, j: int, key: tuple) -> Completion:
        p = self.planted
        non_ascii = _hit(p.non_ascii_rate, "non-ascii", *key)
        if clusters is None:
            text = (
                " I need to reconsider the previous step… before going on."
                if non_ascii
                else " I need to reconsider the previous step before going on."
            )
            return Completion(tuple(self.tokenizer.encode(text)), text, "stop")
        answer = clusters[j % len(clusters)]
        text = " Continuing from here — voilà," if non_ascii else " Continuing from here,"
        boxed = _hit(p.boxed_rate, "boxed", *key)
        if boxed:
            intermediate = 10 + len(key[1]) % 89  # a quantity along the way, not an answer
            text += f" we first get \\boxed{{{intermediate}}} for one part,"
        if _hit(p.conflicting_rate, "conflicting", *key):
            text += f" the answer is {_answer_text(self._shift(answer, 13), self.benchmark)}. Wait, that is not right:"
        final = self._written(answer, "latex", *key)
        if boxed and self.benchmark != "math500":  # a model that boxes along the way boxes its answer too
            final = f"\\boxed{{{final}}}"
        text += f" the final answer is {final}{' ✓' if non_ascii else ''}."
        return Completion(tuple(self.tokenizer.encode(text)), text, "stop")

    def _written(self, answer: str, *key) -> str:
        """How a stated answer is written: boxed on MATH, in a LaTeX form at ``latex_rate``."""
        if _hit(self.planted.latex_rate, *key):
            answer = _latex_form(answer, self.benchmark)
        return _answer_text(answer, self.benchmark)
