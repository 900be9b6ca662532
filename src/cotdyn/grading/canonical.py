"""The canonical answer form of plan v4 (``answer_form: canonical``; docs/reference.md section 4).

Under the rule of plans v1-v3 (``as_written``) a class is the normalized spelling of an answer, and
one value can have two spellings: ``0.50`` normalizes to ``0.5`` but ``0.5`` to ``\\frac{1}{2}``
(Hendrycks' special case), ``$8.50`` to ``8.50`` but ``8.5`` to ``8.5``. Under ``canonical`` an
answer that is one number is its value, an exact rational (``fractions.Fraction``), written in one
form (``written``):

- an integer as its digits, a minus sign in front: ``18``, ``-3``, ``0``;
- any other value as its reduced fraction, the sign outside: ``\\frac{17}{2}``, ``-\\frac{1}{2}``.

One number (``rational``) is: an integer or a decimal, with or without trailing zeros, thousands
separators (``1,000``, ``1{,}000``, ``1\\,000``, ``1,\\!000``) or a leading ``+``/``-``; a fraction
``a/b``, ``\\frac{a}{b}``, ``\\dfrac``/``\\tfrac``, ``\\frac12``, either part a signed decimal;
money (``$8.50``, ``\\$8.50``) is the amount; a percent (``50%``, ``50\\%``) is the number
written, 50, not 0.5: GSM8K's golds state a percent question's answer as the number before the sign
("#### 50" for "what percent ..."), and the MATH normalization the graders of MATH use drops ``\\%``
the same way (so under both rules ``50\\%`` is gold ``50``). Anything else (an expression, a tuple, a
mixed number ``3\\frac{1}{2}``, a zero denominator) is not one number and keeps its class.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Callable

# a decimal with or without a thousands grouping, with or without digits after its point
_DECIMAL = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+"
_SIGNED = rf"[+-]?\s*(?:{_DECIMAL})"
_PLAIN = re.compile(rf"([+-]?)\s*({_DECIMAL})")
_PART = rf"\{{\s*({_SIGNED})\s*\}}|(\d)"  # \frac's argument: braced, or one digit (\frac12)
_FRAC = re.compile(rf"([+-]?)\s*\\frac\s*(?:{_PART})\s*(?:{_PART})")
_SLASH = re.compile(rf"([+-]?)\s*({_DECIMAL})\s*/\s*({_SIGNED})")
# spellings that change no value: money, percent, LaTeX's thin spaces and separators, \dfrac/\tfrac
_NO_VALUE = (("\\$", ""), ("$", ""), ("\\%", ""), ("%", ""), ("\\!", ""), ("{,}", ","), ("\\,", ","))
_FRAC_NAMES = re.compile(r"\\[dt]frac")
# passes of normalize-then-canonicalize: enough for every class the tests generate to be a fixed point
_PASSES = 4


def _value(text: str) -> Fraction:
    """A signed decimal as an exact rational (its grouping commas and spaces dropped)."""
    return Fraction(re.sub(r"[,\s]", "", text).replace("+", ""))


def rational(answer: str | None) -> Fraction | None:
    """The value of an answer that is one number (module docstring), else None."""
    if answer is None:
        return None
    s = answer.strip()
    for spelling, same in _NO_VALUE:
        s = s.replace(spelling, same)
    s = _FRAC_NAMES.sub(r"\\frac", s).strip().rstrip(".")  # a sentence's period is no digit
    if plain := _PLAIN.fullmatch(s):
        return -_value(plain.group(2)) if plain.group(1) == "-" else _value(plain.group(2))
    if frac := _FRAC.fullmatch(s):
        numerator, denominator = frac.group(2) or frac.group(3), frac.group(4) or frac.group(5)
        return _ratio(frac.group(1), numerator, denominator)
    if slash := _SLASH.fullmatch(s):
        return _ratio(slash.group(1), slash.group(2), slash.group(3))
    return None


def _ratio(sign: str, numerator: str, denominator: str) -> Fraction | None:
    below = _value(denominator)
    if below == 0:
        return None  # 1/0 is no number: it keeps its class
    value = _value(numerator) / below
    return -value if sign == "-" else value


def written(value: Fraction) -> str:
    """The one form of a value: an integer's digits, else ``\\frac{p}{q}`` reduced, sign outside."""
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def canonical_number(answer: str | None) -> str | None:
    """The canonical form of an answer that is one number, else None."""
    value = rational(answer)
    return written(value) if value is not None else None


def canonical_class(normalized: str | None, normalize: Callable[[str], str | None]) -> str | None:
    """The canonical class of an answer class ``normalized`` (already normalized by ``normalize``,
    the answer type's own rule): its value's one form when it is one number, else the class itself
    brought to a fixed point of ``normalize``, so that the canonical class normalized again is itself
    (the ``as_written`` rule is not idempotent: ``0.50`` -> ``0.5`` -> ``\\frac{1}{2}``)."""
    result = normalized
    for _ in range(_PASSES):
        if result is None:
            return None
        number = canonical_number(result)
        if number is not None:
            return number
        again = normalize(result)
        if again == result:
            return result
        result = again
    return canonical_number(result) or result
