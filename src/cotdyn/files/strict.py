"""One reading per file: YAML and JSON read strictly and boundedly (issues 48 and 52).

A plan, its REGISTERED and deviations.yaml, a config and every JSON of a study folder is read here,
never by ``yaml.safe_load`` or ``json.loads`` on a file's whole text: those let a key written twice
win by position (a plan whose ``holm:`` says alpha 0.05, then 0.5, runs at 0.5 while a person reads
0.05), and read whatever the path opens, however large or deep.

What each reader checks, before it parses:

- the path names a regular file (``regular_file``): a FIFO, a device, a socket or a folder is named
  and never opened (a FIFO blocks ``open``; ``/dev/zero`` never ends), and with a ``root`` a link
  must resolve inside it;
- the file is opened with O_NONBLOCK and checked again on its descriptor, so a FIFO swapped in after
  the check neither blocks nor is read;
- at most ``max_bytes`` + 1 bytes are read (a sparse 3 GiB file costs no disk but would cost memory);
- JSON nests at most ``max_depth`` deep, counted by a scan that does not recurse;
- YAML aliases expand to at most ``max_aliases`` nodes in all (an alias bomb expands 9^9-fold from
  a few hundred bytes), and a recursive alias is refused;
- no mapping holds a key twice: the refusal names the file, the key by its dotted path and both lines;
- YAML has one reading (``cotdyn.files.one_reading``): no merge key, explicit tag, non-ASCII key,
  invisible character or scalar that YAML 1.1 and YAML 1.2 resolve apart.

Every refusal is an ``UntrustedFileError`` (a ValueError) whose message begins with the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from cotdyn.files.one_reading import NotOneReading, check_one_reading
from cotdyn.files.terminal import printable

MAX_YAML_BYTES = 1 << 20  # a plan is 13 kB, a config a few kB
MAX_ALIASES = 10_000  # nodes that aliases may add; the registered files use none
MAX_DEPTH = 64  # the deepest file cotdyn writes nests under 10


class UntrustedFileError(ValueError):
    """A file that is not read as it is; the message names the file and why."""


class MissingFile(UntrustedFileError):
    """Nothing at the path (a dangling link included)."""


def kind_of(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def _name(path) -> str:
    return printable(str(path))


def regular_file(path: str | Path, root: str | Path | None = None) -> os.stat_result:
    """The stat of ``path`` if it names a regular file, checked before anything opens it; a link is
    followed, and with ``root`` it must resolve inside ``root``. UntrustedFileError otherwise."""
    path = Path(path)
    try:
        if root is not None:  # a link at the file or at any folder on its way
            target = path.resolve()
            if not target.is_relative_to(Path(root).resolve()):
                raise UntrustedFileError(
                    f"{_name(path)}: resolves outside {_name(root)} (to {_name(target)}); not opened"
                )
        st = os.stat(path)
    except FileNotFoundError:
        raise MissingFile(f"{_name(path)}: not found") from None
    except OSError as e:  # a loop of links, a name too long, a folder that cannot be entered
        raise UntrustedFileError(f"{_name(path)}: cannot be examined ({e.strerror or type(e).__name__})") from None
    kind = kind_of(st.st_mode)
    if kind:
        raise UntrustedFileError(f"{_name(path)}: {kind}, not a regular file; not opened")
    return st


def read_bytes(path: str | Path, *, max_bytes: int, root: str | Path | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them (see the module docstring)."""
    path = Path(path)
    st = regular_file(path, root)
    if st.st_size > max_bytes:
        raise UntrustedFileError(f"{_name(path)}: {st.st_size} bytes, more than the {max_bytes} it may hold")
    try:
        # O_NONBLOCK: a FIFO put in its place since the check opens at once instead of waiting for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise MissingFile(f"{_name(path)}: not found") from None
    except OSError as e:
        raise UntrustedFileError(f"{_name(path)}: cannot be opened ({e.strerror or type(e).__name__})") from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        kind = kind_of(os.fstat(fd).st_mode)  # what was opened, whatever the name pointed to before
        if kind:
            raise UntrustedFileError(f"{_name(path)}: {kind}, not a regular file; not read")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:  # it grew since its stat
        raise UntrustedFileError(f"{_name(path)}: more than the {max_bytes} bytes it may hold")
    return data


def read_text(path: str | Path, *, max_bytes: int, root: str | Path | None = None) -> str:
    data = read_bytes(path, max_bytes=max_bytes, root=root)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UntrustedFileError(f"{_name(path)}: not UTF-8 text (byte {e.start})") from None


def _twice(path, dotted: str, first: int, second: int) -> UntrustedFileError:
    return UntrustedFileError(
        f"{_name(path)}: key '{printable(dotted)}' appears twice (lines {first} and {second}): "
        "which one a reader takes depends on the reader; write it once"
    )


# --- JSON -------------------------------------------------------------------------------------

_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'  # unrolled: linear on long strings
_TOKENS = re.compile(_STRING + r"|[\[\]{}:,]|\s+|[^\s\[\]{}:,\"]+")


_ESCAPES = re.compile(rb"\\.", re.DOTALL)
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')


def json_depth(text: str) -> int:
    """How deep ``text``'s arrays and objects nest, counted without recursion and at C speed (every
    step a bytes operation): escapes dropped, then all but brackets and quotes, then what lies
    between quotes; the depth is the highest running count of open brackets."""
    import numpy as np

    kept = _ESCAPES.sub(b"", text.encode("utf-8", "surrogatepass")).translate(None, _NOT_STRUCTURE)
    brackets = b"".join(kept.split(b'"')[::2])
    if not brackets:
        return 0
    steps = np.frombuffer(brackets, dtype=np.uint8)
    # '[' (91) and '{' (123) open, ']' and '}' close
    return int(np.cumsum(np.where((steps == 91) | (steps == 123), 1, -1), dtype=np.int64).max())


class DuplicateKey(Exception):
    def __init__(self, key: str):
        self.key = key


def refuse_duplicates(pairs: list) -> dict:
    """``json.loads``'s object_pairs_hook for an object whose keys are each written once (json
    keeps the last of two): raises DuplicateKey naming the key."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def _dotted(parts: list[str]) -> str:
    """A key's path as a reader writes it: ``holm.alpha``, ``files[2].sha256``."""
    return ".".join(parts).replace(".[", "[")


def _label(key) -> str:
    return f"[{key}]" if isinstance(key, int) else str(key)


def json_duplicate(text: str) -> tuple[str, int, int] | None:
    """(dotted path, first line, second line) of the first key an object of ``text`` holds twice,
    found by a scan of its tokens that keeps a stack, not a recursion; None if there is none."""
    line, stack = 1, []  # each frame: [kind, keys seen -> line, current key or index, expects a key]
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token[0] in " \t\r\n":
            line += token.count("\n")
        elif token in ("{", "["):
            stack.append([token, {}, 0 if token == "[" else None, token == "{"])
        elif token in ("}", "]"):
            stack.pop() if stack else None
        elif token == ",":
            if stack and stack[-1][0] == "[":
                stack[-1][2] += 1
            elif stack:
                stack[-1][3] = True
        elif token == ":":
            stack[-1][3] = False if stack else None
        elif token[0] == '"' and stack and stack[-1][0] == "{" and stack[-1][3]:
            key, seen = json.loads(token), stack[-1][1]
            if key in seen:
                parents = [_label(frame[2]) for frame in stack[:-1]]
                return _dotted([*parents, key]), seen[key], line
            seen[key] = line
            stack[-1][2] = key
    return None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (only finite numbers are read)")


def parse_json(text: str, source, *, max_depth: int = MAX_DEPTH, constants: bool = False) -> Any:
    """``text`` (of the file ``source``) as JSON: no key twice, at most ``max_depth`` deep and,
    unless ``constants``, no NaN or Infinity."""
    depth = json_depth(text)
    if depth > max_depth:
        raise UntrustedFileError(f"{_name(source)}: JSON nested {depth} deep, more than the {max_depth} it may")
    hooks = {} if constants else {"parse_constant": _no_constant}
    try:
        return json.loads(text, object_pairs_hook=refuse_duplicates, **hooks)
    except DuplicateKey as e:
        found = json_duplicate(text)
        if found is None:  # the scan and the parser disagree on where: name the key alone
            raise UntrustedFileError(f"{_name(source)}: key '{printable(e.key)}' appears twice") from None
        raise _twice(source, *found) from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        raise UntrustedFileError(f"{_name(source)}: not JSON ({printable(str(e))[:200]})") from None


def read_json(
    path: str | Path,
    *,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
    root: str | Path | None = None,
    constants: bool = False,
) -> Any:
    """The JSON file at ``path``, read as the module docstring says."""
    return parse_json(read_text(path, max_bytes=max_bytes, root=root), path, max_depth=max_depth, constants=constants)


# --- YAML -------------------------------------------------------------------------------------


def _children(node: yaml.Node) -> list[tuple[Any, yaml.Node]]:
    """(label, child) of a node: a mapping's keys and values, a sequence's items."""
    if isinstance(node, yaml.MappingNode):
        out = []
        for key, value in node.value:
            label = key.value if isinstance(key, yaml.ScalarNode) else "?"
            out += [(label, key), (label, value)]
        return out
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    return []


def expanded_size(root: yaml.Node, source) -> int:
    """How many nodes the document holds with every alias expanded, computed on the shared graph
    (each node once, no recursion); a node that contains itself is refused."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for _, child in _children(node))
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            raise UntrustedFileError(f"{_name(source)}: line {node.start_mark.line + 1}: a recursive alias")
        open_nodes.add(id(node))
        stack.append((node, True))
        for _, child in _children(node):
            if id(child) in open_nodes:
                line = child.start_mark.line + 1
                raise UntrustedFileError(f"{_name(source)}: line {line}: a recursive alias (it contains itself)")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def distinct_nodes(root: yaml.Node) -> int:
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack += [child for _, child in _children(node)]
    return len(seen)


def yaml_duplicate(root: yaml.Node, constructor: yaml.constructor.SafeConstructor) -> tuple[str, int, int] | None:
    """(dotted path, first line, second line) of a key some mapping holds twice, None if none does.
    Keys are compared as the loader constructs them (``0x1`` and ``1`` are one key)."""
    seen_nodes, stack = set(), [(root, [])]
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key, line = constructor.construct_object(key_node), key_node.start_mark.line + 1
                try:
                    if key in keys:
                        return _dotted([*path, str(key)]), keys[key], line
                    keys[key] = line
                except TypeError:  # an unhashable key: the constructor names it
                    continue
        for label, child in reversed(_children(node)):
            stack.append((child, [*path, f"[{label}]" if isinstance(label, int) else str(label)]))
    return None


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, with the composed document checked (aliases, duplicate keys) before any
    Python object is made of it."""

    source: Any = "<yaml>"
    max_aliases: int = MAX_ALIASES

    def construct_document(self, node):
        added = expanded_size(node, self.source) - distinct_nodes(node)
        if added > self.max_aliases:
            raise UntrustedFileError(
                f"{_name(self.source)}: its aliases expand to {added} more nodes, more than the {self.max_aliases} "
                "a file may (an alias bomb)"
            )
        found = yaml_duplicate(node, self)
        if found:
            raise _twice(self.source, *found)
        return super().construct_document(node)


def yaml_error(e: yaml.YAMLError) -> str:
    """What a YAML error says, and where, without the lines of the file it quotes (a file named by a
    study handed to a reviewer must not reach the terminal through an error message)."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + str(getattr(e, "problem", None) or getattr(e, "context", None) or type(e).__name__)


def parse_yaml(text: str, source, *, max_aliases: int = MAX_ALIASES) -> Any:
    """``text`` (of the file ``source``) as YAML, strictly (see the module docstring), with one reading
    (``cotdyn.files.one_reading``: what YAML 1.1, YAML 1.2 and a person would read apart is refused)."""
    try:
        check_one_reading(text, source)
    except NotOneReading as e:
        raise UntrustedFileError(str(e)) from None
    loader = StrictLoader(text)
    loader.source, loader.max_aliases = source, max_aliases
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        raise UntrustedFileError(f"{_name(source)}: not valid YAML: {yaml_error(e)}") from None
    except RecursionError:
        raise UntrustedFileError(f"{_name(source)}: YAML nested deeper than can be read") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, *, max_bytes: int = MAX_YAML_BYTES, max_aliases: int = MAX_ALIASES, root=None) -> Any:
    """The YAML file at ``path``, read as the module docstring says."""
    return parse_yaml(read_text(path, max_bytes=max_bytes, root=root), path, max_aliases=max_aliases)
