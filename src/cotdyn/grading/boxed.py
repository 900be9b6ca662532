"""The last ``\\boxed{...}`` of a text: the one reading of a boxed answer that every answer type shares."""

from __future__ import annotations

import re


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), with nested braces balanced."""
    text = text or ""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        # "\boxed 5" form: the token after a space
        match = re.match(r"\\boxed\s+([^\s$]+)", text[start:])
        return match.group(1) if match else None
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : i]
    return None  # unbalanced: the box never closes
