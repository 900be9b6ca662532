"""Step segmentation of a reference chain into units, and prefixes as token offsets.

Seed 003 sections 2, 3.3 and 5.2: the registered rule splits on blank lines (``\\n\\s*\\n``) and
caps the units at 8, merging units 8..N into the 8th as the original text (not re-joined).
Prefix k (k = 0..K, K = min(units, cap)) is the chain through the end of unit k; prefix 0 is empty.

Units are found on the decoded text, then each unit's end is moved to the first token boundary
at or after it, so a prefix is always a run of the chain's own generated token ids. A boundary
inside a character (a byte-level tokenizer spends several tokens on 'Ä' or '٣') is no boundary:
its prefix would decode to a replacement character that the chain never wrote.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

Span = tuple[int, int]

RULES = ("blank_line", "newline", "step_marker", "sentence", "token_window")
TOKEN_WINDOW = 40  # tokens per unit under the token_window rule (docs/reference.md section 6)

_BLANK_LINE = re.compile(r"\n\s*\n")
_NEWLINE = re.compile(r"\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_STEP_MARKER = re.compile(r"Step [0-9]+:")


def _split(text: str, separator: re.Pattern) -> list[Span]:
    """Spans between separators, trimmed of surrounding whitespace; empty pieces dropped."""
    spans, start = [], 0
    for match in separator.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return [_trim(text, span) for span in spans if text[span[0] : span[1]].strip()]


def _trim(text: str, span: Span) -> Span:
    start, end = span
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _step_marker_units(text: str) -> list[Span]:
    """Zhao's rule: units begin at 'Step N:' markers; without markers, newline, then sentence."""
    starts = [m.start() for m in _STEP_MARKER.finditer(text)]
    if starts:
        bounds = ([0] if text[: starts[0]].strip() else []) + starts + [len(text)]
        pieces = [(a, b) for a, b in zip(bounds, bounds[1:])]
        return [_trim(text, p) for p in pieces if text[p[0] : p[1]].strip()]
    units = _split(text, _NEWLINE)
    return units if len(units) > 1 else _split(text, _SENTENCE_END)


def units(text: str, rule: str, char_ends: Sequence[int] | None = None) -> list[Span]:
    """Character spans of the units of ``text`` under ``rule`` (before any cap).

    ``char_ends[t]`` is the length of the text decoded from the first t+1 tokens; it is needed
    only by the token_window rule.
    """
    if rule == "blank_line":
        return _split(text, _BLANK_LINE)
    if rule == "newline":
        return _split(text, _NEWLINE)
    if rule == "sentence":
        return _split(text, _SENTENCE_END)
    if rule == "step_marker":
        return _step_marker_units(text)
    if rule == "token_window":
        if char_ends is None:
            raise ValueError("the token_window rule needs the chain's token offsets")
        char_ends = _next_boundary(char_ends)
        ends = list(char_ends[TOKEN_WINDOW - 1 :: TOKEN_WINDOW])
        if char_ends and (not ends or ends[-1] != char_ends[-1]):
            ends.append(char_ends[-1])
        starts = [0] + ends[:-1]
        return [s for s in (_trim(text, (a, b)) for a, b in zip(starts, ends)) if s[1] > s[0]]
    raise ValueError(f"unknown segmentation rule '{rule}' (known: {', '.join(RULES)})")


def cap_units(spans: list[Span], cap: int | None) -> list[Span]:
    """Merge units cap..N into the cap-th, as the original text span."""
    if cap is None or len(spans) <= cap:
        return spans
    return spans[: cap - 1] + [(spans[cap - 1][0], spans[-1][1])]


NOT_A_BOUNDARY = -1


def char_ends(token_ids: Sequence[int], decode: Callable[[Sequence[int]], str]) -> list[int]:
    """``char_ends[t]`` = length of the text decoded from ``token_ids[:t+1]``, or NOT_A_BOUNDARY
    where that text is not the start of the whole chain's text (the token ends inside a character).

    Decoding every prefix (rather than summing per-token strings) is what makes a prefix's text
    equal the chain text up to its boundary, whatever the tokenizer does with spaces and bytes.
    """
    text = decode(token_ids)
    ends = []
    for t in range(len(token_ids)):
        prefix = decode(token_ids[: t + 1])
        ends.append(len(prefix) if text.startswith(prefix) else NOT_A_BOUNDARY)
    return ends


def _next_boundary(ends: Sequence[int]) -> list[int]:
    """Each token's end moved to the next real boundary (the last token always is one)."""
    out, following = list(ends), len(ends) and ends[-1]
    for t in range(len(out) - 1, -1, -1):
        following = out[t] = out[t] if out[t] != NOT_A_BOUNDARY else following
    return out


def prefix_token_counts(spans: list[Span], ends: Sequence[int]) -> list[int]:
    """Token count of prefix k = 0..K: the first token boundary at or after unit k's end
    (NOT_A_BOUNDARY is below every end, so a token ending inside a character is passed over)."""
    counts, t = [0], 0
    for _, end in spans:
        while t < len(ends) and ends[t] < end:
            t += 1
        counts.append(min(t + 1, len(ends)))
    return counts


def segment(
    text: str,
    token_ids: Sequence[int],
    decode: Callable[[Sequence[int]], str],
    rule: str,
    cap: int | None,
) -> tuple[list[int], int]:
    """Prefix token counts (k = 0..K) of a chain, and its raw unit count before the cap."""
    ends = char_ends(token_ids, decode)
    raw = units(text, rule, ends)
    return prefix_token_counts(cap_units(raw, cap), ends), len(raw)


def checkpoints(n_tokens: int, stride: int) -> list[int]:
    """Token-checkpoint prefixes (seed 002): 0, stride, 2*stride, ..., always including the last."""
    counts = list(range(0, n_tokens, stride))
    if not counts or counts[-1] != n_tokens:
        counts.append(n_tokens)
    return counts
