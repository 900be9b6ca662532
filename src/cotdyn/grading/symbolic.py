"""The sensitivity variant's equivalence (``equivalence: math_verify``, ``grading.answers.equivalent``):
math-verify's symbolic comparison of two answers as written, each parsed once per distinct string."""

from __future__ import annotations

import functools
import re

UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")


def math_verify_verdicts(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], bool]:
    """``math_verify_equal`` of each (answer, gold) pair: the grading page's verdicts."""
    return {pair: math_verify_equal(*pair) for pair in pairs}


def math_verify_equal(a: str, b: str) -> bool:
    """math-verify on two answers as written: each parsed as one math expression (``$...$``)."""
    from math_verify import verify

    return bool(verify(math_verify_parsed(b), math_verify_parsed(a)))


@functools.lru_cache(maxsize=1 << 14)
def math_verify_parsed(x: str) -> list:
    """math-verify's parse of an answer as written. Cached: parsing is most of math-verify's cost, a
    gold is compared with every answer to its problem and an answer recurs across cells (a panel's
    grading page parses some 4,000 distinct strings 24,000 times); verify only reads what it is given
    (sympy expressions are immutable)."""
    from math_verify import parse

    # an answer as written is one math expression; a text with its own '$' or box is parsed whole
    return parse(x if UNESCAPED_DOLLAR.search(x) or "\\boxed" in x else f"${x}$")
