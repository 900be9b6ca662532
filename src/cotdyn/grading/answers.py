"""Answer extraction, normalization and equivalence (docs/reference.md section 4; seed 003 section 3.1).

GSM8K: the final number of a text, with currency symbols and thousands separators stripped, a
trailing period and a trailing point-zero dropped. Gold: the number after ``####``.

MATH-500: the content of the last ``\\boxed{...}`` (balanced braces) under the standard MATH
normalization of Hendrycks et al. extended to MATH-500's own gold spellings
(``cotdyn.grading.math_normal.strip_string``; ``is_equiv`` is equality of normalized strings),
falling back to the final whole number (a fraction, a signed or decimal number, a number with
thousands separators). ``\\text{...}`` is unwrapped, not deleted, so answers such as
``\\text{Evelyn}`` stay scorable (the original harness deleted them).

Extraction rules (``EXTRACTIONS``): ``final_number`` is the registered one (above);
``final_statement`` is a sensitivity variant for the ``number`` and ``boxed`` types, which reads the
expression of a closing "the final answer is ..." (a box still wins) before falling back to the
final number. ``equivalence: math_verify`` compares the raw strings (``raw`` of an extraction,
``gold_expression`` of a gold) with math-verify's own parser.

Every benchmark has one of four answer types (docs/reference.md section 4): ``number`` (the GSM8K
rules above), ``boxed`` (the MATH rules), ``choice`` (an option's letter, ``cotdyn.grading.choices``) and
``string`` (normalized exact match: NFKC, case-folded, whitespace collapsed, end punctuation and
quotes dropped; the answer is what follows the last "answer is"/"Answer:", else the last line).
Each function takes a registered benchmark's name (``cotdyn.grading.registry``) or an answer type.
A benchmark may declare its own ``extract`` and ``normalize`` (``registry.Benchmark``: money golds
such as "$8.50" read as 8.5, say); where it does, they replace its type's extraction and
normalization above, and every function here reads them through ``own_rule``. The declarations of
GSM8K, MATH-500 and the others declare neither, so their rules are the types' (plans v1-v4).

Answer classes for entropy are the normalized strings; ``None`` means no answer was found. Under
``answer_form: canonical`` (plan v4; ``cotdyn.grading.canonical``) an answer of the number or boxed
type that is one number is its value in one form (``18``, ``\\frac{17}{2}``), so ``0.50``,
``\\frac12`` and ``$0.50`` are one class; under ``as_written`` (plans v1-v3, every function's default)
the classes are the normalized spellings above.
``answer_or_none`` is the one definition of a missing answer (None, NaN, pandas NA, a blank
string): every module that reads a stored answer passes it through, because a parquet round trip
turns a missing string into NaN.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from cotdyn.grading import choices as _choices
from cotdyn.grading.boxed import last_boxed
from cotdyn.grading.canonical import canonical_class, canonical_number

# strip_string is re-exported: the MATH normalization lives in cotdyn.grading.math_normal
from cotdyn.grading.math_normal import MATH_NUMBER, final_math_number, normalize_math, strip_string  # noqa: F401

# the one definition of a missing answer, re-exported: callers read it from here
from cotdyn.grading.missing import answer_or_none, answers_or_none, is_answered  # noqa: F401
from cotdyn.grading.registry import REGISTRY

# where a text states its answer (the string type's rule and the final_statement extraction)
from cotdyn.grading.statements import closing_expression, final_statement
from cotdyn.grading.symbolic import math_verify_equal
from cotdyn.grading.types import (  # noqa: F401 (ANSWER_FORMS, CANONICAL: re-exported for callers)
    ANSWER_FORMS,
    ANSWER_TYPES,
    AS_WRITTEN,
    CANONICAL,
    EQUIVALENCES,
    EXTRACTIONS,
    REGISTERED_EXTRACTION,
)

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
    # the answer as written, before normalization (what math-verify parses); two extractions that
    # find one answer are equal however it was spelled
    raw: str | None = field(default=None, compare=False)


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


def answer_type(rule: str) -> str:
    """The answer type of a registered benchmark's name, or of an answer type's own name."""
    if rule in ANSWER_TYPES:
        return rule
    if rule in REGISTRY:
        return REGISTRY[rule].answer
    raise ValueError(
        f"unknown benchmark '{rule}' (registered: {', '.join(REGISTRY)}; or an answer type: {', '.join(ANSWER_TYPES)})"
    )


def own_rule(benchmark: str, rule: str):
    """A registered benchmark's own ``extract`` or ``normalize`` (``registry.Benchmark``), or None
    (an answer type's name, or a benchmark that keeps its type's rule)."""
    declared = None if benchmark in ANSWER_TYPES else REGISTRY.get(benchmark)
    return getattr(declared, rule) if declared is not None else None


def _number_class(raw: str | None, benchmark: str) -> str | None:
    """A number as written -> its class: the benchmark's own normalization, else the GSM8K rule."""
    if raw is None:
        return None
    own = own_rule(benchmark, "normalize")
    return (own(raw) or None) if own is not None else normalize_number(raw)


def normalize_string(answer: str) -> str | None:
    """A free-text answer's class: NFKC, case-folded, markdown, end punctuation and quotes dropped."""
    text = unicodedata.normalize("NFKC", answer).casefold()
    text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"[*_`]", "", text)
    text = " ".join(text.split()).strip(" .,:;!?\"'“”‘’$")
    return text or None


# the answer types whose answers may be numbers, which the canonical form writes by their value
NUMERIC_TYPES = ("number", "boxed")


def _check_form(answer_form: str) -> None:
    if answer_form not in ANSWER_FORMS:
        raise ValueError(f"unknown answer_form '{answer_form}' (known: {', '.join(ANSWER_FORMS)})")


def normalize(
    answer: str | None, benchmark: str, options: Sequence[str] | None = None, answer_form: str = AS_WRITTEN
) -> str | None:
    """Normalized answer class of a raw answer string, or None when nothing remains.

    ``answer_form``: ``as_written`` (plans v1-v3) or ``canonical`` (plan v4: a number or boxed answer
    that is one number is its value's one form, ``cotdyn.grading.canonical``)."""
    _check_form(answer_form)
    answer = answer_or_none(answer)
    if answer is None:
        return None
    options = None if options is None else tuple(options)
    key = (answer, answer_type(benchmark), own_rule(benchmark, "normalize"), options, answer_form)
    try:
        hash(key)
    except TypeError:  # an option, or a plugin's rule, that cannot be a cache key
        return _normalized.__wrapped__(*key)
    return _normalized(*key)


@functools.lru_cache(maxsize=1 << 16)
def _normalized(answer: str, kind: str, own, options: tuple | None, answer_form: str) -> str | None:
    """``normalize`` of an answer that is a string, by its benchmark's type and own rule (a pure
    function of them: cached, since an answer recurs across the rows, cells and steps of a study; a
    panel's audit normalized some 476,000 answers, a few thousand of them distinct)."""
    if own is not None:
        if answer_form == CANONICAL and kind in NUMERIC_TYPES and canonical_number(answer) == answer:
            # a class already in cotdyn's canonical form (what a study stores under canonical) is
            # itself: the benchmark's own rule was written for answers as extracted, not that form
            return answer
        # the benchmark's own class as written; under canonical, its type's canonical class of it
        return answer_class(own(answer) or None, kind, answer_form)
    if answer_form == CANONICAL and kind in NUMERIC_TYPES:
        # a whole number-type answer that is one number (1/2, \frac{17}{2}: a canonical class read
        # again) is its value; the GSM8K rule would read its last number, the 2
        whole = canonical_number(answer) if kind == "number" else None
        return whole or canonical_class(normalize(answer, kind), lambda s: normalize(s, kind))
    if kind == "boxed":
        boxed = last_boxed(answer)  # an answer given with its box ("\\boxed{C}") is its content
        result = normalize_math(boxed if boxed is not None else answer, normalize_number)
    elif kind == "choice":
        result = _choices.letter_of(answer, options)
    elif kind == "string":
        result = normalize_string(answer)
    else:
        result = normalize_number(answer) or final_number(answer)
    return result or None


def _found(answer: str | None, raw: str | None) -> Extraction:
    return Extraction(answer, OK, raw.strip()) if answer is not None and raw else _none_or(answer)


def _none_or(answer: str | None) -> Extraction:
    return Extraction(answer, OK) if answer is not None else Extraction(None, NO_ANSWER)


def answer_class(stored: str | None, benchmark: str, answer_form: str = AS_WRITTEN) -> str | None:
    """The class under ``answer_form`` of an answer class found under ``as_written`` (what
    samples.parquet, chains.parquet and the problems table store): itself under ``as_written`` and
    for the choice and string types; its canonical class otherwise. ``extract`` and ``gold_answer``
    under ``canonical`` are this of their ``as_written`` class, so a stored class maps to what a
    re-extraction would find."""
    _check_form(answer_form)
    stored = answer_or_none(stored)
    if answer_form == AS_WRITTEN or stored is None or answer_type(benchmark) not in NUMERIC_TYPES:
        return stored
    return normalize(stored, answer_type(benchmark), answer_form=CANONICAL)


def in_answer_form(values: Iterable[Any], benchmark: str, answer_form: str = AS_WRITTEN) -> list[str | None]:
    """``answer_class`` over a column of stored answers (each distinct answer mapped once)."""
    memo: dict[str | None, str | None] = {}
    out = []
    for value in answers_or_none(values):
        if value not in memo:
            memo[value] = answer_class(value, benchmark, answer_form)
        out.append(memo[value])
    return out


def extract(
    text: str,
    benchmark: str,
    options: Sequence[str] | None = None,
    extraction: str = REGISTERED_EXTRACTION,
    answer_form: str = AS_WRITTEN,
) -> Extraction:
    """Extract and normalize the final answer of a model's text (missing text has no answer).

    ``options``: a multiple-choice problem's option texts, so a choice named by its text counts.
    ``extraction``: the rule (``EXTRACTIONS``); ``final_statement`` changes the number and boxed types.
    ``answer_form``: the answer is found where ``as_written`` finds it, then takes its class under
    this form (``answer_class``).
    """
    found = _extract(text, benchmark, options, extraction)
    if answer_form == AS_WRITTEN or found.answer is None:
        _check_form(answer_form)
        return found
    answer = answer_class(found.answer, benchmark, answer_form)
    return Extraction(answer, OK, found.raw) if answer is not None else Extraction(None, NO_ANSWER)


def _extract(text: str, benchmark: str, options: Sequence[str] | None, extraction: str) -> Extraction:
    """``extract`` under ``as_written``."""
    if extraction not in EXTRACTIONS:
        raise ValueError(f"unknown extraction '{extraction}' (known: {', '.join(EXTRACTIONS)})")
    kind = answer_type(benchmark)
    text = answer_or_none(text) or ""
    own = own_rule(benchmark, "extract")
    if own is not None and extraction == REGISTERED_EXTRACTION:
        raw = own(text)
        return _found(normalize(raw, benchmark) if raw else None, raw)
    if kind == "choice":
        letter = _choices.extract_letter(text, options)
        return _found(letter, letter)
    if kind == "string":
        boxed = last_boxed(text)
        stated = boxed if boxed is not None else final_statement(text) or ""
        return _found(normalize(stated, benchmark), stated)
    if kind == "boxed":
        boxed = last_boxed(text)
        if boxed is not None and (answer := normalize(boxed, benchmark)) is not None:
            return _found(answer, boxed)
    if extraction == "final_statement" and (stated := closing_expression(text)) is not None:
        if kind == "boxed":
            answer = normalize(stated, benchmark)
        else:
            answer = _number_class(_final_number_raw(stated), benchmark)  # final_number(stated), or the own rule's
        if answer is not None:
            return _found(answer, stated)
    if kind == "boxed":
        found = final_math_number(text)
        raw = found[0] if found else None
        return _found(normalize(raw, benchmark), raw)
    raw = _final_number_raw(text)
    return _found(_number_class(raw, benchmark), raw)


def _final_number_raw(text: str) -> str | None:
    """The last number of ``text`` as written (the GSM8K rule), or None."""
    for match in reversed(_NUMBER.findall(text or "")):
        if normalize_number(match) is not None:
            return match
    return None


def final_number_start(text: str, benchmark: str) -> int | None:
    """Where the final number that the registered fallback reads starts, None when there is none."""
    if answer_type(benchmark) == "boxed":
        found = final_math_number(text)
        return found[1] if found else None
    starts = [m.start() for m in _NUMBER.finditer(text or "") if normalize_number(m.group()) is not None]
    return starts[-1] if starts else None


def gold_marker(benchmark: str) -> str | None:
    """The marker a declared benchmark's gold follows (``Benchmark.gold_after``: GSM8K's '####'), or None."""
    declared = REGISTRY.get(benchmark)
    return declared.gold_after if declared is not None else None


def gold_expression(raw: str, benchmark: str) -> str | None:
    """The gold as written, before normalization (what math-verify parses): the text after a
    declared gold marker (GSM8K's '####'), the last box of a MATH solution (else the answer field itself), else the raw gold."""
    raw = answer_or_none(raw)
    if raw is None:
        return None
    marker = gold_marker(benchmark)
    if marker is not None:
        return raw.split(marker)[-1].strip() if marker in raw else None
    if answer_type(benchmark) == "boxed":
        boxed = last_boxed(raw)
        return boxed if boxed is not None else raw
    return raw


def gold_answer(
    raw: str, benchmark: str, options: Sequence[str] | None = None, answer_form: str = AS_WRITTEN
) -> str | None:
    """Normalized gold: a declared benchmark's own rule (GSM8K's number after its '####', MATH's
    answer field or the last box of its solution), else the answer type's normalization; under
    ``answer_form: canonical`` its canonical class (``answer_class``)."""
    return answer_class(_gold_as_written(raw, benchmark, options), benchmark, answer_form)


def _gold_as_written(raw: str, benchmark: str, options: Sequence[str] | None) -> str | None:
    raw = answer_or_none(raw)
    kind = answer_type(benchmark)
    if raw is None:
        return None
    own = own_rule(benchmark, "normalize")
    if own is not None:
        expression = gold_expression(raw, benchmark)
        return (own(expression) or None) if expression is not None else None
    if gold_marker(benchmark) is not None:
        return normalize_number(gold_expression(raw, benchmark) or "")
    if kind == "number":
        return normalize_number(raw)
    if kind == "boxed":
        return normalize(gold_expression(raw, benchmark), "boxed")
    return normalize(raw, kind, options)


def equivalent(
    a: str | None,
    b: str | None,
    benchmark: str,
    method: str = "normalized",
    options: Sequence[str] | None = None,
    answer_form: str = AS_WRITTEN,
) -> bool:
    """The registered equivalence: equality of normalized answers (Hendrycks ``is_equiv``), each
    normalized under ``answer_form`` (``as_written``: plans v1-v3; ``canonical``: plan v4).

    ``method="math_verify"`` is the sensitivity variant: symbolic equivalence by math-verify, which
    parses ``a`` and ``b`` itself, so pass them as written (``Extraction.raw``, ``gold_expression``).
    ``options``: a multiple-choice problem's option texts (an option's text is its letter).
    """
    a, b = answer_or_none(a), answer_or_none(b)
    if a is None or b is None:
        return False
    if method == "normalized":
        x, y = normalize(a, benchmark, options, answer_form), normalize(b, benchmark, options, answer_form)
        # an answer grading cannot read equals nothing, another unreadable one least of all
        return x is not None and x == y
    if method == "math_verify":
        return math_verify_equal(a, b)
    raise ValueError(f"unknown equivalence method '{method}' (known: {', '.join(EQUIVALENCES)})")
