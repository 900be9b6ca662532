"""A registered file with exactly one reading (issue 60): what a YAML 1.1 reader (PyYAML, which cotdyn
uses), a YAML 1.2 reader and a person would read differently is refused, naming the line.

A plan is what a registration freezes; a reviewer reads it by eye, a colleague's tool may read it
with a YAML 1.2 library, and cotdyn runs what PyYAML reads. They disagree on:

- **characters**: NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR end a line for YAML 1.1 and for no
  person (a comment "hidden" behind one holds a key), bidirectional controls reorder what is shown,
  and other control characters show as nothing;
- **merge keys** (``<<: *defaults``): YAML 1.1 copies the keys of another mapping in, YAML 1.2 reads
  a key named ``<<``;
- **explicit tags** (``!!int "010"``): a value whose type the file, not its text, decides;
- **keys that look alike**: a key must be printable ASCII, so ``аlpha`` (Cyrillic a) cannot stand
  beside ``alpha``;
- **scalars that resolve differently**: YAML 1.1 reads ``010`` as 8, ``yes``/``off`` as booleans,
  ``1_000`` as 1000 and ``1:30`` as 90, where YAML 1.2 reads 10 and strings; YAML 1.2 reads ``1e3``
  as a number where YAML 1.1 reads a string. Such a scalar must be quoted, or written as both read it.

``yaml12_scalar`` is the YAML 1.2 core schema's resolution of a plain scalar (the spec's table,
section 10.3.2); ``tests/test_one_reading.py`` checks the whole against ruamel.yaml, an independent
YAML 1.2 parser, on generated plan texts.
"""

from __future__ import annotations

import math
import re
import unicodedata

import yaml

from cotdyn.files.terminal import printable

# Line breaks for YAML 1.1 only, and characters that change what a person sees.
_LINE_BREAKS_11 = {"\x85": "NEL", "\u2028": "LINE SEPARATOR", "\u2029": "PARAGRAPH SEPARATOR"}
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ALLOWED_CONTROLS = {"\t", "\n", "\r"}

# YAML 1.2 core schema (section 10.3.2), plain scalars only.
_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
_TRUE = re.compile(r"(?:true|True|TRUE)\Z")
_FALSE = re.compile(r"(?:false|False|FALSE)\Z")
_INT10 = re.compile(r"[-+]?[0-9]+\Z")
_INT8 = re.compile(r"0o[0-7]+\Z")
_INT16 = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"[-+]?\.(?:inf|Inf|INF)\Z")
_NAN = re.compile(r"\.(?:nan|NaN|NAN)\Z")


_UNREADABLE = object()


class NotOneReading(ValueError):
    """A file that readers would read differently; the message names the file, the line and the fix."""


def yaml12_scalar(text: str):
    """The value YAML 1.2's core schema gives the plain scalar ``text``."""
    if _NULL.match(text):
        return None
    if _TRUE.match(text):
        return True
    if _FALSE.match(text):
        return False
    if _INT10.match(text):
        return int(text)
    if _INT8.match(text):
        return int(text[2:], 8)
    if _INT16.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return -math.inf if text.startswith("-") else math.inf
    if _NAN.match(text):
        return math.nan
    return text


def _same(a, b) -> bool:
    """The same value of the same type (True is not 1; NaN is NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _yaml11_scalar(text: str, loader: yaml.SafeLoader):
    node = yaml.ScalarNode(loader.resolve(yaml.ScalarNode, text, (True, False)), text)
    try:
        return loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError):  # a timestamp YAML 1.1 resolves but cannot construct
        return _UNREADABLE
    finally:
        loader.constructed_objects.clear()


def _refuse(source, line: int, why: str) -> NotOneReading:
    return NotOneReading(f"{printable(str(source))}: line {line}: {why}")


def check_characters(text: str, source) -> None:
    for number, line in enumerate(text.split("\n"), 1):
        for ch in line:
            if ch in _LINE_BREAKS_11:
                raise _refuse(
                    source, number, f"a {_LINE_BREAKS_11[ch]} character (U+{ord(ch):04X}): YAML 1.1 reads a line "
                    "break there and a person does not; remove it",
                )  # fmt: skip
            if ch in _BIDI or ch == "\ufeff" or (unicodedata.category(ch) == "Cc" and ch not in _ALLOWED_CONTROLS):
                raise _refuse(
                    source, number, f"an invisible or reordering character (U+{ord(ch):04X}): what a person sees "
                    "is not what is read; remove it",
                )  # fmt: skip


def check_events(text: str, source) -> None:
    """Merge keys, explicit tags and plain scalars that YAML 1.1 and 1.2 resolve differently."""
    loader = yaml.SafeLoader("")
    stack: list[list] = []  # per open collection: [is a mapping, the next scalar is a key]
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1
            is_key = bool(stack) and stack[-1][0] and stack[-1][1]
            if stack and stack[-1][0] and isinstance(event, yaml.NodeEvent):
                stack[-1][1] = not stack[-1][1]  # a mapping's nodes alternate: key, value
            if getattr(event, "tag", None) not in (None, "!"):
                raise _refuse(source, line, f"an explicit tag ({printable(event.tag)}): write the value plainly")
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                stack.append([isinstance(event, yaml.MappingStartEvent), True])
            elif isinstance(event, yaml.CollectionEndEvent):
                stack.pop()
            elif isinstance(event, yaml.ScalarEvent):
                _check_scalar(event, is_key, line, source, loader)
    except yaml.YAMLError:
        return  # the strict reader names what does not parse
    finally:
        loader.dispose()


def _check_scalar(event: yaml.ScalarEvent, is_key: bool, line: int, source, loader) -> None:
    value = event.value
    if is_key and not (value.isascii() and value.isprintable()):
        raise _refuse(
            source,
            line,
            f"the key {printable(value)!r} is not printable ASCII: keys that look alike must not read apart",
        )
    if event.style is not None:  # quoted or block scalars are strings for every reader
        return
    if is_key and value == "<<":
        raise _refuse(
            source,
            line,
            "a merge key (<<): YAML 1.1 merges another mapping in, YAML 1.2 reads a key '<<'; write the keys out",
        )
    v11, v12 = _yaml11_scalar(value, loader), yaml12_scalar(value)
    if not _same(v11, v12):
        raise _refuse(
            source, line, f"{printable(value)!r} reads as {v11!r} in YAML 1.1 and {v12!r} in YAML 1.2: quote it "
            "if you mean the text, or write the number or boolean as both read it",
        )  # fmt: skip


def check_one_reading(text: str, source) -> None:
    """Raise NotOneReading if ``text`` (the file ``source``) has more than one reading (module docstring)."""
    check_characters(text, source)
    check_events(text, source)
