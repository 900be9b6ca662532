"""Where a text states its answer in words (docs/reference.md section 4): the string type's rule
(``final_statement``) and the ``final_statement`` extraction's closing expression
(``closing_expression``). Split from ``cotdyn.grading.answers``, which re-exports both."""

from __future__ import annotations

import re

from cotdyn.grading.math_normal import MATH_NUMBER


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


_CLOSING_CUE = re.compile(r"answer\s*(?:is\b|:|=)\s*", re.I)
_PROSE = re.compile(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}")  # two words: a sentence, not an expression
_MATH_SPAN = re.compile(r"\$\$?([^$]+)\$|\\\(([^)]*?)\\\)")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")


def closing_expression(text: str) -> str | None:
    """The expression of a closing "the final answer is ..." (seed 003's system prompt asks for a
    final answer): after the last "answer is"/"answer:", its first math span (``$...$``) if the
    statement has one, else the whole number it opens with, else the statement to its sentence's
    end when it reads as an expression (not two words of prose); None when the text makes no such
    statement."""
    cues = list(_CLOSING_CUE.finditer(text or ""))
    if not cues:
        return None
    rest = text[cues[-1].end() :].lstrip(" \t:*\n")
    end = _SENTENCE_END.search(rest)
    statement = (rest[: end.start()] if end else rest).strip(" *")
    math = _MATH_SPAN.search(rest)
    if math and (end is None or math.start() <= end.start()):
        return (math.group(1) or math.group(2) or "").strip() or None
    if not statement:
        return None
    opening = MATH_NUMBER.match(statement)
    if opening:
        return opening.group().strip()
    return None if _PROSE.search(statement) else statement
