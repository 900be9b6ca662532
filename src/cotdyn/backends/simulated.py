"""A generator with planted ground truth (DESIGN section 8), for tests, calibration and benchmarks.

It writes the same text formats a real model does (blank-line separated 'Step k:' units, a final
answer line, continuations that state an answer, ``\\boxed{}`` on MATH), so segmentation and
extraction run unchanged on it. Its tokenizer is byte-level: one token per UTF-8 byte.

Planted truth, per reference chain (drawn from hashes, so every request is answered the same way
whatever the batch or the order):

- ``units``: the chain has U units, U ~ round(lognormal(log(units_median), units_sigma)), about
  ``unit_chars`` tokens each; it is truncated when its text exceeds the reference budget.
- ``monotone_share``: the share of chains whose number of distinct continuation answers never
  rises; the others get 1-3 planted rises, placed at units 1..7 so that a cap of 8 keeps them.
- ``accuracy_monotone`` / ``accuracy_nonmonotone``: P(the dominant answer is gold) in each group,
  so the planted accuracy gap is their difference.
- ``late_switch_share``: the share of incorrect chains whose dominant answer is gold until 70% of
  the chain and then switches away (seed 002's late-switch failure).
- ``null_rate``: the chance that one prefix of a monotone chain yields no answer at all.

At a prefix with u complete units, sample j of n answers with cluster (j mod d_u), d_u the planted
number of distinct answers; cluster 0 is the dominant answer, so it is also the majority. The
empty prefix answers from the question alone, with guesses that are never gold, so a correct chain
is a rescue, an incorrect one never discovers gold, and a late switch is a failed rescue (seed 002
section 4.2). A finished chain's full prefix continues with
nothing (the endpoint asymmetry of seed 003 section 5.2).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import Sequence

import numpy as np

from .base import Completion, Request, Sampling

BOS, EOS = 256, 257
_FINAL = "The final answer is"
_PLAN = re.compile(r"this takes (\d+) steps; we start from (\d+)")
_FILLER = " and we keep careful track of every quantity"
_MAX_DISTINCT = 5


class ByteTokenizer:
    """One token per UTF-8 byte, plus BOS and EOS; a plain-text chat template."""

    bos_token_id, eos_token_id = BOS, EOS
    chat_template = "<|system|>\n{system}\n<|user|>\n{question}\n<|assistant|>\n"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def chat_prompt_ids(self, system_prompt: str, question: str) -> list[int]:
        return [BOS] + self.encode(self.chat_template.format(system=system_prompt, question=question))


@dataclass(frozen=True)
class Planted:
    units_median: float = 6.0
    units_sigma: float = 0.5
    unit_chars: int = 55
    monotone_share: float = 0.6
    accuracy_monotone: float = 0.85
    accuracy_nonmonotone: float = 0.60
    late_switch_share: float = 0.0
    null_rate: float = 0.02


@dataclass(frozen=True)
class _Latent:
    smooth: bool
    correct: bool
    late_switch: bool
    distinct: tuple[int, ...]  # d_u for u = 0..U-1
    nulls: frozenset[int]
    wrong: str


def _rng(*parts) -> np.random.Generator:
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _shift(answer: str, delta: int) -> str:
    """A different answer near ``answer``: numbers shifted by delta, other answers given '+delta'."""
    try:
        value = Decimal(answer)
    except InvalidOperation:
        return f"{answer}+{delta}"
    return str(value + delta)


class SimulatedBackend:
    name = "simulated"

    def __init__(self, golds: dict[str, str], benchmark: str, planted: Planted | None = None):
        """``golds`` maps question text to gold answer: the simulator's oracle."""
        self.golds = golds
        self.benchmark = benchmark
        self.planted = planted or Planted()
        self.tokenizer = ByteTokenizer()
        self.model_revision = "simulated-" + hashlib.sha256(repr(self.planted).encode()).hexdigest()[:16]

    def generate(self, requests: Sequence[Request], desc: str = "") -> list[list[Completion]]:
        return [[self._complete(r, j) for j in range(r.n)] for r in requests]

    def effective_sampling(self, sampling: Sampling) -> dict:
        return sampling.as_dict()

    def describe(self) -> dict:
        return {"backend": self.name, "model_id": "simulated", "revision": self.model_revision,
                "planted": asdict(self.planted), "dtype": None, "device": "cpu"}

    # --- the planted model ---
    def _complete(self, request: Request, j: int) -> Completion:
        head, _, prefix = self.tokenizer.decode(request.prompt_ids).partition("\n<|assistant|>\n")
        question = head.split("<|user|>\n", 1)[-1]
        if question not in self.golds:
            raise KeyError(f"simulated backend: question not in its oracle: {question[:60]!r}")
        gold = self.golds[question]
        if request.role == "reference":
            return self._reference(question, gold, request)
        return self._continuation(question, gold, prefix, j)

    def _reference(self, question: str, gold: str, request: Request) -> Completion:
        p = self.planted
        rng = _rng("reference", question, request.seed)
        n_units = max(1, int(round(rng.lognormal(math.log(p.units_median), p.units_sigma))))
        start = int(rng.integers(10, 99))
        steps = [f"Step 1: this takes {n_units} steps; we start from {start}"]
        steps += [f"Step {i}: the running value is {start + 3 * i}" for i in range(2, n_units + 1)]
        steps = [(s + _FILLER * 3)[: max(len(s), p.unit_chars - 1)] + "." for s in steps]
        latent = self._latent(question, start, n_units, gold)
        final = _answer_text(gold if latent.correct else latent.wrong, self.benchmark)
        text = "\n\n".join(steps) + f"\n{_FINAL} {final}."
        ids = self.tokenizer.encode(text)
        budget = request.sampling.max_tokens
        if len(ids) > budget:
            ids = ids[:budget]
            return Completion(tuple(ids), self.tokenizer.decode(ids), "length")
        return Completion(tuple(ids), text, "stop")

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
        wrong = _shift(gold, int(rng.integers(1, 9)) * (1 if rng.random() < 0.5 else -1))
        return _Latent(smooth, correct, late_switch, tuple(distinct), frozenset(nulls), wrong)

    @staticmethod
    def _prior_distinct(question: str) -> int:
        return int(_rng("prior", question).integers(2, _MAX_DISTINCT))

    def _continuation(self, question: str, gold: str, prefix: str, j: int) -> Completion:
        if _FINAL in prefix:  # a finished chain continues with nothing
            return Completion((), "", "stop")
        pieces = prefix.split("\n\n")
        plan = _PLAN.search(pieces[0])
        complete = len(pieces) - (0 if pieces[-1].rstrip().endswith(".") else 1)
        if not plan or complete < 1:  # the empty prefix: guesses from the question, never gold
            d = self._prior_distinct(question)
            return self._say([_shift(gold, 7 * c) for c in range(1, d + 1)], j)
        n_units, start = int(plan.group(1)), int(plan.group(2))
        latent = self._latent(question, start, n_units, gold)
        u = min(complete, n_units - 1)
        if u in latent.nulls:
            return self._say(None, j)
        switched_yet = u >= 0.7 * n_units
        dominant = gold if latent.correct or (latent.late_switch and not switched_yet) else latent.wrong
        return self._say([dominant] + [_shift(dominant, 11 * c) for c in range(1, latent.distinct[u])], j)

    def _say(self, clusters: list[str] | None, j: int) -> Completion:
        if clusters is None:
            text = " I need to reconsider the previous step before going on."
        else:
            answer = _answer_text(clusters[j % len(clusters)], self.benchmark)
            text = f" Continuing from here, the final answer is {answer}."
        return Completion(tuple(self.tokenizer.encode(text)), text, "stop")


def _answer_text(answer: str, benchmark: str) -> str:
    return f"\\boxed{{{answer}}}" if benchmark == "math500" else answer
