"""How the simulated model writes: steps (in digits or in words), answers, their equivalent forms."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_FINAL = "The final answer is"
_PLAN = re.compile(r"this takes (\d+) steps; we start from (\d+)")
_PLAN_WORDS = re.compile(r"this takes ([a-z -]+?) steps; we start from ([a-z-]+)")
_FILLER = " and we keep careful track of every quantity"
_FILLER_NON_ASCII = " — où 每一步 compte ✓, on suit chaque quantité"  # no digit; 2-3 bytes a char early on
_NOT_SURE = "\nI am not sure how to finish this."


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
