"""The MATH rule's normalization and its whole-number fallback (docs/reference.md section 4).

``strip_string`` is the standard MATH normalization of Hendrycks et al. (2021), with ``\\text{}``
unwrapped rather than deleted, extended to every spelling MATH-500's own 500 golds use, so that a
model writing a gold in any of its usual spellings gets the gold's class, and a different value a
different class (tests/test_grading_math500.py checks all 500, each in its respellings):

- thousands separators ``,\\!`` and ``{,}`` (``10,\\!080``, ``14{,}916``) and thin spaces ``\\,``;
- ``\\dfrac``/``\\tfrac``; ``\\frac ab`` and ``\\frac{a}b``; an integer ``a/b`` anywhere is
  ``\\frac{a}{b}`` (a mixed number ``1 4/5`` is ``1\\frac{4}{5}``), and a sign stays outside the fraction (``-10/9``, ``\\frac{-10}{9}`` and
  ``-\\frac{10}{9}`` are one class);
- degrees (``^\\circ``, ``^{\\circ}``, ``°``, "degrees"), a trailing unit in ``\\text{ ...}`` or
  ``\\mbox{ ...}`` (with an exponent: ``\\mbox{ inches}^2``), ``\\%``, ``\\$``;
- a matrix's row break ``\\\\`` stays itself (the classes stay LaTeX that math-verify parses);
  outside an environment (``\\begin{...}`` ... ``\\end{...}``), where no row breaks, a doubled
  backslash before a letter is an escaped one (``\\\\left(``, ``\\\\dfrac``: a text written as a
  string literal's source, as Math-Verify's and Hendrycks' own test cases are);
- ``\\left``/``\\right``, ``\\displaystyle``, ``bmatrix`` as ``pmatrix``, ``π`` as ``\\pi``,
  a base subscript ``_{5}`` as ``_5``;
- ``x = ...`` and ``x \\in ...`` keep their right-hand side;
- a letter in brackets (``\\text{(C)}``, ``(C)``) is the letter ``C``;
- a plain number takes its numeric form (no separators, no trailing zeros after a decimal point).

``final_math_number`` is the registered fallback when no ``\\boxed`` is present: the last whole
number of a text, where a fraction (``2/3``, ``\\frac{2}{3}``), a signed or decimal number and a
number with thousands separators are each one number. Every pattern here is linear in the text.
"""

from __future__ import annotations

import functools
import re

# --- the whole-number fallback ---------------------------------------------------------------

_SEPARATOR = r"(?:,\\!\s?|\{,\}|\\,|,)"
_INTEGER = rf"\d{{1,3}}(?:{_SEPARATOR}\d{{3}})+(?![\d])|\d+"
_DECIMAL = rf"(?:{_INTEGER})(?:\.\d+)?|\.\d+"
_FRAC = rf"\\[dt]?frac\s*(?:\{{\s*-?\s*(?:{_DECIMAL})\s*\}}|\d)\s*(?:\{{\s*(?:{_DECIMAL})\s*\}}|\d)"
_SLASH = rf"(?:{_DECIMAL})\s*/\s*(?:{_DECIMAL})"
# a sign is the number's own when nothing but spaces or a '$' stands between it and the digits
MATH_NUMBER = re.compile(rf"(?<![\w.])(?:-\s*)?(?:{_FRAC}|{_SLASH}|{_DECIMAL})")


def final_math_number(text: str) -> tuple[str, int] | None:
    """The last whole number of ``text`` as written, and where it starts; None when there is none."""
    last = None
    for last in MATH_NUMBER.finditer(text or ""):
        pass
    if last is None:
        return None
    return last.group(), last.start()


# --- normalization ---------------------------------------------------------------------------

_UNIT_WORDS = (
    "degrees?|cents?|dollars?|inches|inch|feet|foot|ft|cm|mm|km|meters?|units?|square\\s*\\w+|"
    "sq\\s*\\w+|hours?|minutes?|seconds?|days?|miles?|mph|pounds?|students?|people|ways"
)
_TEXT_UNIT = re.compile(r"\\(?:text|mbox|mathrm)\{\s[^{}]*\}(?:\^\{?\d\}?)?\s*$")
_BARE_UNIT = re.compile(rf"^(-?[\d.,]+|\\frac\{{\d+\}}\{{\d+\}})\s*(?:{_UNIT_WORDS})(?:\^\{{?\d\}}?)?\.?$")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf|textrm)\{([^{}]*)\}")
_SLASH_FRACTION = re.compile(r"(?<![\w./])(-?)(\d+)/(\d+)(?![\w./{])")
_MIXED_NUMBER = re.compile(r"(?<![\w./])(\d+)\s+(\d+)/(\d+)(?![\w./{])")  # 1 4/5
_SIGNED_FRAC = re.compile(r"\\frac\{-([^{}]*)\}")
_LETTER = re.compile(r"\(([A-Z])\)")
_PASSES = 4
_CONTROL_SPACE = re.compile(r"(?<!\\)\\ ")  # "\ " is a space ("\\ " a row break and a space)
_ESCAPED_COMMAND = re.compile(r"(?<!\\)\\\\(?=[A-Za-z])")  # "\\frac": "\frac" escaped once more
_ENVIRONMENT = re.compile(r"\\(begin|end)\{[^{}]*\}")
_PLAIN_NUMBER = re.compile(r"-?(\d+|\d{1,3}(,\d{3})+)(\.\d+)?")


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
    """Every integer a/b standing alone -> \\frac{a}{b}, its sign outside."""
    return _SLASH_FRACTION.sub(r"\1\\frac{\2}{\3}", s)


def _fix_sqrt(s: str) -> str:
    """\\sqrt3 -> \\sqrt{3}."""
    return re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", s)


def _unwrap_text(s: str) -> str:
    """\\text{Evelyn} -> Evelyn; a trailing unit ('5.4 \\text{ cents}', '864 \\mbox{ inches}^2') is dropped."""
    s = _TEXT_UNIT.sub("", s)
    return _TEXT.sub(r"\1", s)


def _unescape_commands(s: str) -> str:
    """\\\\left( -> \\left( outside every environment; inside one, \\\\ is the row break it may be."""
    out, depth, start = [], 0, 0
    for tag in _ENVIRONMENT.finditer(s):
        if depth == 0:
            out.append(_ESCAPED_COMMAND.sub(r"\\", s[start : tag.start()]))
            start = tag.start()
        depth = depth + 1 if tag.group(1) == "begin" else max(depth - 1, 0)
        if depth == 0:
            out.append(s[start : tag.end()])
            start = tag.end()
    tail = s[start:]
    out.append(_ESCAPED_COMMAND.sub(r"\\", tail) if depth == 0 else tail)
    return "".join(out)


@functools.lru_cache(maxsize=1 << 16)  # a pure function of its string, met again and again in a panel's answers
def strip_string(s: str) -> str:
    """The MATH normalization (Hendrycks et al. 2021, extended as the module says), keeping \\text{} content."""
    # a matrix's row break \\ stays (Hendrycks made it \, which math-verify cannot parse and which
    # made "\\ \frac" a different string once normalized again)
    s = _CONTROL_SPACE.sub(" ", _unescape_commands(s.replace("\n", "")).replace("\\!", ""))
    s = s.replace("{,}", ",").replace("\\,", "").replace("\\;", " ").replace("\\displaystyle", "")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("bmatrix", "pmatrix").replace("π", "\\pi").replace("°", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\degree", "")
    s = s.replace("\\$", "").replace("$", "")
    s = _unwrap_text(s)
    s = s.replace("\\%", "").replace("%", "")
    s = s.strip()
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if s.startswith("."):
        s = "0" + s
    # "x = 5" or "k=5": keep the right-hand side of a short variable assignment; "x \in [a,b]" too
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0].strip()) <= 2:
        s = sides[1]
    s = re.sub(r"^\s*[A-Za-z]\s*\\in\s*", "", s)
    s = _fix_sqrt(s)
    s = _MIXED_NUMBER.sub(r"\1\\frac{\2}{\3}", s)
    s = s.replace(" ", "")
    s = _fix_fracs(s)
    s = _BARE_UNIT.sub(r"\1", s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    s = _fix_slash_fraction(s)
    s = _SIGNED_FRAC.sub(r"-\\frac{\1}", s).replace("--", "")
    s = re.sub(r"_\{(\w+)\}", r"_\1", s)
    s = s.rstrip(".")
    letter = _LETTER.fullmatch(s)
    return letter.group(1) if letter else s


def normalize_math(answer: str, normalize_number) -> str | None:
    """A MATH answer's class: ``strip_string``, then a plain number in its numeric form."""
    result = strip_string(answer)
    # a class normalized again stays itself: one pass can leave a form that another pass rewrites
    # (a nested \text{}, "\frac0." made "\frac{0}{.}"), so passes repeat to a fixed point
    for _ in range(_PASSES):
        again = strip_string(result)
        if again == result:
            break
        result = again
    # a plain number (1,000 or 18.0) takes its numeric form; a list such as "1,-2" does not
    if _PLAIN_NUMBER.fullmatch(result):
        result = normalize_number(result)
        if result is not None and "." in result:
            result = result.rstrip("0")  # 18.90 and 18.9 are one number (18.0 is already 18)
    return result or None
