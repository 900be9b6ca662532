"""Answer extraction, normalization and equivalence (docs/design.md section 4; seed 003 section 3.1).

GSM8K: the final number of a text, with currency symbols and thousands separators stripped, a
trailing period and a trailing point-zero dropped. Gold: the number after ``####``.

MATH-500: the content of the last ``\\boxed{...}`` (balanced braces) under the standard MATH
normalization of Hendrycks et al. (``strip_string``; ``is_equiv`` is equality of normalized
strings), falling back to the final number. ``\\text{...}`` is unwrapped, not deleted, so answers
such as ``\\text{Evelyn}`` stay scorable (the original harness deleted them).

Every benchmark has one of four answer types (docs/design.md section 4): ``number`` (the GSM8K
rules above), ``boxed`` (the MATH rules), ``choice`` (an option's letter, ``cotdyn.grading.choices``) and
``string`` (normalized exact match: NFKC, case-folded, whitespace collapsed, end punctuation and
quotes dropped; the answer is what follows the last "answer is"/"Answer:", else the last line).
Each function takes a registered benchmark's name (``cotdyn.grading.registry``) or an answer type.

Answer classes for entropy are the normalized strings; ``None`` means no answer was found.
``answer_or_none`` is the one definition of a missing answer (None, NaN, pandas NA, a blank
string): every module that reads a stored answer passes it through, because a parquet round trip
turns a missing string into NaN.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from cotdyn.grading import choices as _choices
from cotdyn.grading.boxed import last_boxed
from cotdyn.grading.registry import REGISTRY
from cotdyn.grading.types import ANSWER_TYPES

OK = "ok"
NO_ANSWER = "no_answer"
# A reference chain cut by its token budget states no answer of its own: its last number is an
# intermediate value, or a number cut in the middle.
TRUNCATED = "truncated"

_NUMBER = re.compile(r"-?[$€£]?\s?-?\d[\d,]*(?:\.\d+)?|-?[$€£]?\s?-?\.\d+")


@dataclass(frozen=True)
class Extraction:
    answer: str | None
    status: str  # OK | NO_ANSWER


def answer_or_none(value: Any) -> str | None:
    """A stored answer as a string, or None when it is missing (None, NaN, NA, NaT, blank).

    Numbers (a gold read from JSON as 18, say) become their string; anything else is an error
    that names its type, since an answer can only be text.
    """
    if isinstance(value, str):
        return value if value.strip() else None
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"an answer must be text, got the boolean {value!r}")
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else str(float(value))
    raise TypeError(f"an answer must be text or missing, got {type(value).__name__} {value!r}")


def answers_or_none(values: Iterable[Any]) -> list[str | None]:
    """``answer_or_none`` over a column of stored answers."""
    return [answer_or_none(v) for v in values]


def is_answered(values: Iterable[Any]) -> np.ndarray:
    """Boolean mask: which of ``values`` hold an answer (``answer_or_none`` is not None)."""
    return np.array([answer_or_none(v) is not None for v in values], dtype=bool)


def normalize_number(raw: str) -> str | None:
    """Canonical string of one number as written: no currency, separators, trailing '.'/'.0'."""
    s = re.sub(r"[$€£\s]", "", raw).replace(",", "").rstrip(".")
    if s.startswith("--"):
        s = s[1:]
    if "." in s:
        s = re.sub(r"\.0+$", "", s)  # 18.0 and 18.00 are the integer 18
    if s.startswith("."):
        s = "0" + s
    if s.startswith("-."):
        s = "-0" + s[1:]
    if s in ("", "-") or not re.fullmatch(r"-?\d+(\.\d+)?", s):
        return None
    if s == "-0":
        s = "0"
    return s


def final_number(text: str) -> str | None:
    """The last number in ``text``, normalized; None when there is none."""
    matches = _NUMBER.findall(text or "")
    for raw in reversed(matches):
        number = normalize_number(raw)
        if number is not None:
            return number
    return None


# --- Hendrycks MATH normalization (strip_string), with \text{} unwrapped rather than deleted ---


def _fix_fracs(s: str) -> str:
    """\\frac12 -> \\frac{1}{2}, \\frac1b -> \\frac{1}{b}, and (beyond Hendrycks) \\frac{270}7."""
    s = re.sub(r"\\frac\{([^{}]*)\}(\w)", r"\\frac{\1}{\2}", s)
    parts = s.split("\\frac")
    out = parts[0]
    for part in parts[1:]:
        out += "\\frac"
        if part.startswith("{") or len(part) < 2:
            out += part
            continue
        a, b, rest = part[0], part[1], part[2:]
        if b == "{":
            out += "{" + a + "}" + b + rest
        else:
            out += "{" + a + "}{" + b + "}" + rest
    return out


def _fix_slash_fraction(s: str) -> str:
    """a/b with integer a and b -> \\frac{a}{b}."""
    match = re.fullmatch(r"(-?\d+)/(\d+)", s)
    return f"\\frac{{{match.group(1)}}}{{{match.group(2)}}}" if match else s


def _fix_sqrt(s: str) -> str:
    """\\sqrt3 -> \\sqrt{3}."""
    return re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", s)


def _unwrap_text(s: str) -> str:
    """\\text{Evelyn} -> Evelyn; a trailing unit such as '5.4 \\text{ cents}' is dropped."""
    s = re.sub(r"\\text\{\s[^{}]*\}\s*$", "", s)  # units: \text{ cents} at the end (Hendrycks)
    return re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", s)


def strip_string(s: str) -> str:
    """Standard MATH normalization (Hendrycks et al. 2021), keeping \\text{} content."""
    s = s.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "").replace("$", "")
    s = _unwrap_text(s)
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if s.startswith("."):
        s = "0" + s
    # "x = 5" or "k=5": keep the right-hand side of a short variable assignment
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0].strip()) <= 2:
        s = sides[1]
    s = _fix_sqrt(s)
    s = s.replace(" ", "")
    s = _fix_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    s = _fix_slash_fraction(s)
    return s.rstrip(".")


def answer_type(rule: str) -> str:
    """The answer type of a registered benchmark's name, or of an answer type's own name."""
    if rule in ANSWER_TYPES:
        return rule
    if rule in REGISTRY:
        return REGISTRY[rule].answer
    raise ValueError(
        f"unknown benchmark '{rule}' (registered: {', '.join(REGISTRY)}; or an answer type: {', '.join(ANSWER_TYPES)})"
    )


def normalize_string(answer: str) -> str | None:
    """A free-text answer's class: NFKC, case-folded, markdown, end punctuation and quotes dropped."""
    text = unicodedata.normalize("NFKC", answer).casefold()
    text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"[*_`]", "", text)
    text = " ".join(text.split()).strip(" .,:;!?\"'“”‘’$")
    return text or None


def final_statement(text: str) -> str | None:
    """The answer a free text states: after its last "answer is"/"answer:", else its last line."""
    text = text or ""
    cues = list(re.finditer(r"answer\s*(?:is|:)\s*", text, re.I))
    if cues:
        stated = text[cues[-1].end() :].split("\n")[0]
        stated = re.split(r"(?<=[^\d])\.(?:\s|$)", stated)[0]
    else:
        lines = [line for line in text.splitlines() if line.strip()]
        stated = lines[-1] if lines else ""
    return stated.strip() or None


def normalize(answer: str | None, benchmark: str, options: Sequence[str] | None = None) -> str | None:
    """Normalized answer class of a raw answer string, or None when nothing remains."""
    answer = answer_or_none(answer)
    if answer is None:
        return None
    kind = answer_type(benchmark)
    if kind == "boxed":
        result = strip_string(answer)
        # a plain number (1,000 or 18.0) takes its numeric form; a list such as "1,-2" does not
        if re.fullmatch(r"-?(\d+|\d{1,3}(,\d{3})+)(\.\d+)?", result):
            result = normalize_number(result)
    elif kind == "choice":
        result = _choices.letter_of(answer, options)
    elif kind == "string":
        result = normalize_string(answer)
    else:
        result = normalize_number(answer) or final_number(answer)
    return result or None


def extract(text: str, benchmark: str, options: Sequence[str] | None = None) -> Extraction:
    """Extract and normalize the final answer of a model's text (missing text has no answer).

    ``options``: a multiple-choice problem's option texts, so a choice named by its text counts.
    """
    kind = answer_type(benchmark)
    text = answer_or_none(text) or ""
    if kind == "boxed":
        boxed = last_boxed(text)
        answer = normalize(boxed, "boxed") if boxed is not None else None
        if answer is None:
            answer = normalize(final_number(text), "boxed")
    elif kind == "choice":
        answer = _choices.extract_letter(text, options)
    elif kind == "string":
        boxed = last_boxed(text)
        answer = normalize_string(boxed if boxed is not None else final_statement(text) or "")
    else:
        answer = final_number(text)
    return Extraction(answer, OK if answer is not None else NO_ANSWER)


def gold_answer(raw: str, benchmark: str, options: Sequence[str] | None = None) -> str | None:
    """Normalized gold: a registered benchmark's own rule (GSM8K's number after '####', MATH's
    answer field or the last box of its solution), else the answer type's normalization."""
    raw = answer_or_none(raw)
    kind = answer_type(benchmark)
    if raw is None:
        return None
    if benchmark == "gsm8k":
        if "####" not in raw:
            return None
        return normalize_number(raw.split("####")[-1].strip())
    if kind == "number":
        return normalize_number(raw)
    if kind == "boxed":
        boxed = last_boxed(raw)
        return normalize(boxed if boxed is not None else raw, "boxed")
    return normalize(raw, kind, options)


def equivalent(
    a: str | None,
    b: str | None,
    benchmark: str,
    method: str = "normalized",
    options: Sequence[str] | None = None,
) -> bool:
    """The registered equivalence: equality of normalized answers (Hendrycks ``is_equiv``).

    ``method="math_verify"`` is the sensitivity variant: symbolic equivalence by math-verify.
    ``options``: a multiple-choice problem's option texts (an option's text is its letter).
    """
    kind = answer_type(benchmark)
    a, b = answer_or_none(a), answer_or_none(b)
    if a is None or b is None:
        return False
    if method == "normalized":
        x, y = normalize(a, benchmark, options), normalize(b, benchmark, options)
        if kind in ("choice", "string") and x is None:
            return False  # two unreadable choices are not the same choice
        return x == y
    if method == "math_verify":
        return _math_verify_equal(a, b)
    raise ValueError(f"unknown equivalence method '{method}' (known: normalized, math_verify)")


def _math_verify_equal(a: str, b: str) -> bool:
    from math_verify import parse, verify

    def parsed(x: str):
        return parse(f"${x}$")

    return bool(verify(parsed(a), parsed(b)))
