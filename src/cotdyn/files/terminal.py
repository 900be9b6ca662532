"""Text from a study folder printed on a terminal: names and texts with their control characters escaped.

A file name or a model's text may hold an escape sequence that moves the cursor or hides the lines
after it; ``printable`` shows every control character (but none of the ordinary text) as its
Python escape, so what the reviewer reads is what the folder holds.
"""

from __future__ import annotations

import unicodedata


def _shown(char: str) -> str:
    if char in "\n\t" or unicodedata.category(char) not in ("Cc", "Cf", "Zl", "Zp"):
        return char
    return repr(char)[1:-1] if char != "\x7f" else "\\x7f"


def printable(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control character (newline and tab too, unless ``keep_newlines``) escaped."""
    out = "".join(_shown(c) for c in str(text))
    return out if keep_newlines else out.replace("\n", "\\n").replace("\t", "\\t")
