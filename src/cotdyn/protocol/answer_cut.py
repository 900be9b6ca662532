"""Where a reference chain's reasoning ends and its final-answer statement begins (seed 002 Def. 1).

Seed 002 Def. 1 splits a generation into reasoning tokens C_1..C_K and an answer sequence A_1..A_T,
and samples the last state p_K from the reasoning alone. A chain marks no such boundary, so it is
cut by one documented rule:

1. Locate the answer the extraction rule reads (``answers.extract``), by the benchmark's answer
   type (``answers.answer_type``): ``boxed`` (MATH-500) the last ``\\boxed{``/``\\fbox{`` (else the
   final number, as extraction falls back); ``number`` (GSM8K, SVAMP, arithmetic) the final number;
   ``choice`` and ``string``, whose answer may be a letter or free text, the last answer marker
   (below), else the last non-empty line.
2. The final-answer statement is the line holding that answer, from the first answer marker on
   that line at or before the answer ("final answer", "the answer is", "answer:", "####",
   ``\\boxed``; the first, so "The final answer is \\boxed{3}" is cut before "The") or, with no
   marker, from the line's start. The reasoning is everything before it.
3. A chain with no answer of its own (no answer found, or cut by its token budget) is all reasoning.

In tokens, the reasoning is the longest run of the chain's own tokens whose text ends at or before
the cut (a token that straddles the cut belongs to the answer), so a prefix is always a run of
generated token ids, as in ``segment``.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from cotdyn.grading import answers
from cotdyn.protocol.segment import NOT_A_BOUNDARY, char_ends

_MARKER = re.compile(r"(?:the\s+)?final answer|the answer is|answer\s*:|####|\\boxed|\\fbox", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed|\\fbox")


def _answer_position(text: str, benchmark: str) -> int | None:
    """Character offset of the answer extraction reads, None when it finds none."""
    if answers.extract(text, benchmark).answer is None:
        return None
    kind = answers.answer_type(benchmark)
    if kind in ("choice", "string"):
        markers = [m.start() for m in _MARKER.finditer(text)]
        return markers[-1] if markers else text.rstrip().rfind("\n") + 1
    if kind == "boxed":
        boxes = [m.start() for m in _BOXED.finditer(text)]
        if boxes and answers.last_boxed(text) is not None:
            return boxes[-1]
    return answers.final_number_start(text, benchmark)


def reasoning_end(text: str, benchmark: str) -> int:
    """Character offset where the final-answer statement starts (len(text) when there is none)."""
    position = _answer_position(text, benchmark)
    if position is None:
        return len(text)
    line_start = text.rfind("\n", 0, position) + 1
    line_end = text.find("\n", position)
    line_end = len(text) if line_end < 0 else line_end
    markers = [m.start() for m in _MARKER.finditer(text, line_start, line_end) if m.start() <= position]
    return markers[0] if markers else line_start


def reasoning_tokens(
    token_ids: Sequence[int], decode: Callable[[Sequence[int]], str], benchmark: str, answered: bool = True
) -> int:
    """K of seed 002 Def. 1: how many of the chain's tokens are reasoning, before its answer statement.

    ``answered=False`` (a chain with no answer of its own, e.g. cut by its budget) keeps every token.
    """
    if not answered or len(token_ids) == 0:
        return len(token_ids)
    cut = reasoning_end(decode(token_ids), benchmark)
    ends = char_ends(token_ids, decode)
    inside = [t + 1 for t, end in enumerate(ends) if end != NOT_A_BOUNDARY and end <= cut]
    return inside[-1] if inside else 0
