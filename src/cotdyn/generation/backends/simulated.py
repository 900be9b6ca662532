"""A generator with planted ground truth (docs/design.md section 8), for tests, calibration and benchmarks.

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

Misbehaviour, as real models write it. Every rate defaults to 0, and a rate of 0 draws
nothing, so with all of them off the output (and the model revision) is the same byte for byte.
Each is decided by a hash of what the request shows, like the planted truth above.

- Per reference chain (one draw decides at most one of the first two):
  - ``unanswered_rate``: the chain never states an answer. It is written in words ("Step two: the
    running value is forty-eight") and ends "I am not sure how to finish this.", so it holds no
    digit and extraction finds nothing; its prefixes still carry the planted truth.
  - ``cut_rate``: the chain runs on past its plan, step after step, until the reference budget
    falls inside a number; it ends in that number's first digits, with finish reason "length"
    (so the pipeline records no answer of its own; a naive last-number rule would take the cut one).
  - ``off_mode_share``: the chain states an answer that is not the dominant answer of its own
    continuations at its last unit: a chain whose dominant answer is gold states the wrong one (seed
    002's stochastic miss, when its last state is sampled from the reasoning alone), any other
    states gold (a fragile success). Continuations keep the planted truth.
- Per continuation:
  - ``empty_rate``: the model stops at once (text "", no token).
  - ``conflicting_rate``: it states a different answer first, then takes it back and states the
    planted one ("the answer is 12. Wait, that is not right: the final answer is 5.").
  - ``boxed_rate``: it boxes an intermediate quantity, then the answer (several ``\\boxed{}``;
    on GSM8K too, as real models do).
- Per chain and per continuation, each from its own hash:
  - ``latex_rate``: the stated answer is written in an equivalent LaTeX form: ``\\dfrac`` for a
    fraction, a unit for a number (``\\text{ cm}`` on MATH, ``\\$`` on GSM8K). It normalizes to
    the same answer class; answers that are neither are written as usual.
  - ``non_ascii_rate``: the text carries non-ASCII characters (accents, dashes, CJK, a check mark),
    several bytes each; a budget may cut a chain inside one.

Misbehaviour rewrites text, not the planted answers, except that an empty continuation or an
unanswered chain states none. Empty continuations still move the measured shape: the registered
rule drops a null before entropy, and a dropped sample can raise a prefix's entropy (a 3-2 split
becomes 2-2), so they lower the measured monotone coverage below ``monotone_share``.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import Sequence

import numpy as np

from cotdyn.generation.backends.base import Completion, Request, Sampling
from cotdyn.grading.answers import answer_type

BOS, EOS = 256, 257
_FINAL = "The final answer is"
_PLAN = re.compile(r"this takes (\d+) steps; we start from (\d+)")
_PLAN_WORDS = re.compile(r"this takes ([a-z -]+?) steps; we start from ([a-z-]+)")
_FILLER = " and we keep careful track of every quantity"
_FILLER_NON_ASCII = " — où 每一步 compte ✓, on suit chaque quantité"  # no digit; 2-3 bytes a char early on
_NOT_SURE = "\nI am not sure how to finish this."
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


MISBEHAVIOUR = (
    "unanswered_rate",
    "cut_rate",
    "empty_rate",
    "conflicting_rate",
    "boxed_rate",
    "latex_rate",
    "non_ascii_rate",
    "off_mode_share",
)


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
    # misbehaviour (module docstring); 0 = off
    unanswered_rate: float = 0.0
    cut_rate: float = 0.0
    empty_rate: float = 0.0
    conflicting_rate: float = 0.0
    boxed_rate: float = 0.0
    latex_rate: float = 0.0
    non_ascii_rate: float = 0.0
    # the chain states an answer other than the dominant one of its own continuations (seed 002)
    off_mode_share: float = 0.0

    def __post_init__(self):
        for name in MISBEHAVIOUR:
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"planted {name} must lie in [0, 1], got {getattr(self, name)}")
        if self.unanswered_rate + self.cut_rate > 1:
            raise ValueError("planted unanswered_rate + cut_rate must not exceed 1 (one draw decides both)")


def revision(planted: Planted) -> str:
    """The simulated model's revision: a hash of its planted truth. Misbehaviour rates at 0 are left
    out, so configs written before they existed keep their revision (and their cached generations)."""
    shown = ", ".join(f"{k}={v!r}" for k, v in asdict(planted).items() if not (k in MISBEHAVIOUR and v == 0))
    return "simulated-" + hashlib.sha256(f"Planted({shown})".encode()).hexdigest()[:16]


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


def _uniform(*parts) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (cheaper than a generator, for one draw)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big") / 2**64


def _hit(rate: float, *parts) -> bool:
    """Whether a misbehaviour of this rate happens to the text keyed by ``parts``; no draw at 0."""
    return rate > 0 and _uniform(*parts) < rate


def _shift(answer: str, delta: int) -> str:
    """A different answer near ``answer``: numbers shifted by delta, other answers given '+delta'."""
    try:
        value = Decimal(answer)
    except InvalidOperation:
        return f"{answer}+{delta}"
    return str(value + delta)


def _shift_letter(answer: str, delta: int) -> str:
    """A different option than ``answer`` (a letter) among the first four, or as many as reach it."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    i = letters.index(answer) if answer in letters else 0
    n = max(4, i + 1)
    return letters[(i + 1 + (abs(delta) - 1) % (n - 1)) % n]


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

    def generate(self, requests: Sequence[Request], desc: str = "") -> list[list[Completion]]:
        return [[self._complete(r, j) for j in range(r.n)] for r in requests]

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


def _answer_text(answer: str, benchmark: str) -> str:
    return f"\\boxed{{{answer}}}" if benchmark == "math500" else answer


def _latex_form(answer: str, benchmark: str) -> str:
    """An equivalent way to write a (normalized) answer: same class after normalization."""
    if "\\frac" in answer:
        return answer.replace("\\frac", "\\dfrac")
    try:
        Decimal(answer)
    except InvalidOperation:
        return answer  # neither a fraction nor a number: written as usual
    return f"\\${answer}" if benchmark == "gsm8k" else f"{answer}\\text{{ cm}}"


def _step(i: int, n_units: int, start: int) -> str:
    if i == 1:
        return f"Step 1: this takes {n_units} steps; we start from {start}"
    return f"Step {i}: the running value is {start + 3 * i}"


def _spelled_step(i: int, n_units: int, start: int) -> str:
    """``_step`` in words: no digit anywhere, so the chain states no number."""
    if i == 1:
        return f"Step one: this takes {_spell(n_units)} steps; we start from {_spell(start)}"
    return f"Step {_spell(i)}: the running value is {_spell(start + 3 * i)}"


def _plan(first_unit: str) -> tuple[int, int] | None:
    """(units, start) from a chain's first unit, in digits or in words; None if it states no plan."""
    match = _PLAN.search(first_unit)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = _PLAN_WORDS.search(first_unit)
    if match:
        n_units, start = _unspell(match.group(1)), _unspell(match.group(2))
        if n_units is not None and start is not None:
            return n_units, start
    return None


_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _spell(n: int) -> str:
    """A non-negative integer in English words: 'forty-two', 'three hundred five'."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + (f"-{_ONES[n % 10]}" if n % 10 else "")
    if n < 1000:
        return f"{_ONES[n // 100]} hundred" + (f" {_spell(n % 100)}" if n % 100 else "")
    return f"{_spell(n // 1000)} thousand" + (f" {_spell(n % 1000)}" if n % 1000 else "")


def _unspell(words: str) -> int | None:
    """The inverse of ``_spell``; None for anything it does not write (e.g. a word cut short)."""
    total = current = 0
    for word in words.replace("-", " ").split():
        if word in _ONES:
            current += _ONES.index(word)
        elif word in _TENS[2:]:
            current += 10 * _TENS.index(word)
        elif word == "hundred":
            current *= 100
        elif word == "thousand":
            total, current = total + current * 1000, 0
        else:
            return None
    return total + current
