"""Multiple-choice answers: how the options are shown, and which option a text chose.

Seed 002 measures answer-distribution trajectories on ARC, whose answer is an option; the answer
class of a continuation is the option's letter. The options are shown in the prompt as lettered
lines, so a model may name its choice by letter in many ways ("(B)", "B.", "the answer is B",
"\\boxed{B}", "**B**") or by repeating the option's text; every one of these is the letter.

Extraction reads the text from its end: an explicit statement of the answer ("answer is B",
"Answer: (B)", "I choose B", a boxed letter) wins over a bare letter, and the last such statement
wins over an earlier one, so a model that corrects itself is scored on its correction. A capital
letter that ends the text after a concluding word ("I think it is D", "so D.", "D is correct") is
an explicit statement too; an article ("A plant") is not a letter, since it never ends the text.
"""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Sequence

from cotdyn.grading.boxed import last_boxed

LETTERS = string.ascii_uppercase
# Without the problem's options a letter is read among the first ten (MMLU-Pro has ten options).
DEFAULT_OPTIONS = 10
INSTRUCTION = "Answer with the letter of the correct option."


def letters(n_options: int) -> str:
    if not 1 <= n_options <= len(LETTERS):
        raise ValueError(f"a multiple-choice question needs 1 to {len(LETTERS)} options, got {n_options}")
    return LETTERS[:n_options]


def show(question: str, options: Sequence[str]) -> str:
    """The question as the model sees it: the stem, one lettered line per option, the instruction."""
    lines = [f"({letter}) {text}" for letter, text in zip(letters(len(options)), options)]
    return "\n".join([question.rstrip(), "", *lines, "", INSTRUCTION])


def _fold(text: str) -> str:
    """Text compared as an option: NFKC, case-folded, markdown and punctuation at the ends dropped,
    inner whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[*_`]", "", text)
    return " ".join(text.split()).strip(" .,:;!?\"'()[]{}")


def _valid(options: Sequence[str] | None) -> str:
    return letters(len(options)) if options else LETTERS[:DEFAULT_OPTIONS]


# An explicit statement of the answer: "the answer is", "Answer:", "I choose", "the correct option is".
_CUE = (
    r"(?:answer(?:\s+(?:is|would\s+be|will\s+be|should\s+be|must\s+be))?"
    r"|(?:choose|select|pick|go\s+with)|(?:choice|option)\s+(?:is|would\s+be))"
    r"(?:\s+(?:option|choice|letter))?\s*[:=\-]?\s*"
)
# A weaker naming of a letter: "option B", "choice (C)" (also said of options ruled out).
_NAMED = r"(?:option|choice)\s*"
_MARKED_LETTER = r"[\*_\s]*[\(\[\{]?\s*(?:\\text\{)?\s*([A-Za-z])\s*\}?\s*[\)\]\}]?[\*_]*"
# A capital letter that ends the text after a word that concludes ("I think it is D", "so D.",
# "Therefore, (D)"): the letter is the last word, so an article ("A plant") never is.
_CLOSING_LETTER = re.compile(
    r"(?:(?i:\b(?:is|be|say|so|therefore|thus|hence|then|pick|choose|go\s+with))\s*[,:]?|^|[,:;]|\n)"
    r"\s*[\*_]*[\(\[]?([A-Z])[\)\]]?[\*_]*\s*[.!]?[\*_]*\s*\Z"
)
_CLOSING_TAIL = 120  # characters read for a closing letter: the end of the text only


def _boxed_contents(text: str) -> list[str]:

    found, rest = [], text
    while (content := last_boxed(rest)) is not None:
        found.append(content)
        rest = rest[: max(rest.rfind("\\boxed"), rest.rfind("\\fbox"))]
    return found  # last box first


def letter_of(answer: str, options: Sequence[str] | None = None) -> str | None:
    """The option an isolated answer names: a letter in any dress ("B", "(b)", "**B.**",
    "\\text{B}", "B) photosynthesis") or an option's exact text; None otherwise."""
    valid = _valid(options)
    stripped = re.sub(r"\\text\{([^{}]*)\}", r"\1", unicodedata.normalize("NFKC", answer)).strip()
    match = re.fullmatch(r"[\*_\s]*[\(\[\{]?\s*([A-Za-z])\s*[\)\]\}]?[.:)]?[\*_]*[.:]?(?:\s+(.*))?", stripped, re.S)
    if match and match.group(1).upper() in valid:
        letter, rest = match.group(1).upper(), match.group(2)
        # "B) photosynthesis": a letter followed by text is that letter only when the text is its
        # option's (or there are no options to compare with); "A plant" is not the letter A
        if rest is None or (options and _fold(rest) == _fold(options[valid.index(letter)])):
            return letter
        if not options and re.fullmatch(r"[\(\[]?[A-Za-z][\)\]]\s*.*|[A-Za-z][.:]\s+.*", stripped, re.S):
            return letter
    if options:
        folded = _fold(answer)
        hits = [valid[i] for i, text in enumerate(options) if folded and _fold(text) == folded]
        if len(hits) == 1:
            return hits[0]
    return None


def extract_letter(text: str, options: Sequence[str] | None = None) -> str | None:
    """The letter of the option ``text`` finally chooses, or None (docs/reference.md section 4)."""
    text = unicodedata.normalize("NFKC", text or "")
    valid = _valid(options)
    for content in _boxed_contents(text):
        letter = letter_of(content, options)
        if letter is not None:
            return letter
    candidates: list[tuple[int, int, str]] = []  # (strength, end position, letter)
    # 2: an explicit statement of the answer, its letter in any dress
    for m in re.finditer(_CUE + _MARKED_LETTER + r"(?![A-Za-z0-9'])", text, re.I):
        letter = m.group(1).upper()
        if letter in valid and (m.group(1).isupper() or _dressed(m.group(0))):
            candidates.append((2, m.end(), letter))
    # 2: "B is correct", "(B) is the right answer"
    for m in re.finditer(
        r"(?<![A-Za-z0-9])[\(\[]?([A-Z])[\)\]]?\s+is\s+(?:the\s+)?(?:correct|right|best|answer)", text
    ):
        if m.group(1) in valid:
            candidates.append((2, m.end(), m.group(1)))
    tail = len(text) - min(len(text), _CLOSING_TAIL)
    closing = _CLOSING_LETTER.search(text, tail)
    if closing and closing.group(1) in valid:
        candidates.append((2, len(text), closing.group(1)))
    for m in re.finditer(_NAMED + _MARKED_LETTER + r"(?![A-Za-z0-9'])", text, re.I):
        if m.group(1) in valid:
            candidates.append((1, m.end(), m.group(1)))
    # 1: a letter in brackets or bold, or alone on a line ("(B)", "**B**", "B." as the last line)
    for m in re.finditer(r"[\(\[]([A-Z])[\)\]]|\*\*([A-Z])\*\*|^\s*([A-Z])\s*[.):]?\s*$", text, re.M):
        letter = next(g for g in m.groups() if g)
        if letter in valid:
            candidates.append((1, m.end(), letter))
    # 1: an option's text stated as the answer ("the answer is photosynthesis")
    if options:
        for m in re.finditer(_CUE + r"(.+?)\s*(?:[.\n]|$)", text, re.I):
            letter = letter_of(m.group(1), options)
            if letter is not None:
                candidates.append((1, m.end(), letter))
    if not candidates:
        # the whole reply is one option's text
        return letter_of(text, options) if options else None
    strength = max(c[0] for c in candidates)
    return max(c for c in candidates if c[0] == strength)[2]


def _dressed(match_text: str) -> bool:
    """A lower-case letter counts after a cue only in brackets ("answer is (b)"), since
    "the answer is a ..." is an article."""
    return bool(re.search(r"[\(\[\{][a-z][\)\]\}]", match_text))
