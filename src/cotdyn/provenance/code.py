"""The code a rule's job runs, as one hash: its script and every cotdyn module the script imports,
directly or through other modules, each normalised by its syntax tree.

The workflow gives each rule this hash as a param (``code_of``, cotdyn.workflow.params), and its
profiles drop Snakemake's own ``code`` trigger, which for a ``script:`` rule compares only the
script's mtime: an edit inside ``cotdyn.records.derive`` changed nothing it saw, and a comment in a
script reran every job below it. With the hash, a change to what a job executes reruns that job;
comments, docstrings and line breaks do not count.

A plugin (cotdyn.plugins) is code a job runs too, though no import names it: a job one of whose
modules reads a group's registry (imports it, ``PLUGIN_REGISTRIES``; importing the package that only
discovers the group does not count) also hashes every installed plugin of that group that is not
cotdyn's own, with the modules of its own package that it imports; an edit to a lab's backend
reruns the generation jobs, an edit to a lab's signal the records and the analyses that read them,
and neither reruns the plan check.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

PACKAGE = "cotdyn"
# each group's registry, the module through which a job reads the group's plugins, and the modules
# that import it without reading a plugin: the package whose import discovers them, and cotdyn's own
# declarations. A job runs a group's plugins where another of its modules imports the registry.
PLUGIN_REGISTRIES = {
    "cotdyn.backends": (
        "cotdyn.generation.backends.registry",
        ("cotdyn.generation.backends", "cotdyn.generation.backends.builtin"),
    ),
    "cotdyn.benchmarks": ("cotdyn.grading.registry", ("cotdyn.grading", "cotdyn.grading.builtin_benchmarks")),
    "cotdyn.signals": ("cotdyn.protocol.signals", ("cotdyn.protocol", "cotdyn.protocol.builtin_signals")),
}


def _without_docstrings(node: ast.AST) -> None:
    """Drop the docstring of a module, class or function (it is not run)."""
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                node.body = body[1:]


def _imports(node: ast.AST) -> list[tuple[int, str, tuple[str, ...]]]:
    """An import statement as (level, module, names) triples; [] for any other node."""
    if isinstance(node, ast.Import):
        return [(0, alias.name, ()) for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [(node.level, node.module or "", tuple(a.name for a in node.names))]
    return []


def _normalise(tree: ast.AST) -> tuple[str, list]:
    """The tree as text without docstrings, line numbers or layout, and every import in it (those
    inside functions too: the job runs them), in one walk."""
    imports = []
    for node in ast.walk(tree):
        imports += _imports(node)
        _without_docstrings(node)
    return ast.dump(tree, include_attributes=False), imports


def normalised(source: str) -> str:
    """The source as its syntax tree, without comments, docstrings, line numbers or layout."""
    return _normalise(ast.parse(source))[0]


def _parsed(path: Path) -> tuple[str, tuple[tuple[int, str, tuple[str, ...]], ...]]:
    """The sha256 of a file's normalised source, and its imports as (level, module, names) triples;
    parsed once per version of the file (every rule's hash shares the modules it reads)."""
    stat = path.stat()
    return _parsed_version(path.resolve(), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=None)
def _parsed_version(path: Path, mtime_ns: int, size: int):
    dump, imports = _normalise(ast.parse(path.read_text()))
    return hashlib.sha256(dump.encode()).hexdigest(), tuple(imports)


def _module_file(name: str, src: Path, package: str = PACKAGE) -> Path | None:
    """The file of module ``name`` under ``src``, or None (not a module of ``package``, or an attribute)."""
    if name != package and not name.startswith(package + "."):
        return None
    base = src.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imported(module: str, is_package: bool, imports) -> set[str]:
    """The dotted names a module's imports may load: each module, each name imported from it (it may
    be a submodule), and every package above them (importing a submodule runs their __init__)."""
    names = set()
    for level, target, members in imports:
        if level:  # relative: from the module's own package, up level - 1 packages
            parts = module.split(".")[: len(module.split(".")) - level + (1 if is_package else 0)]
            target = ".".join(parts + ([target] if target else []))
        names |= {target} | {f"{target}.{m}" for m in members}
    return {".".join(n.split(".")[:i]) for n in names for i in range(1, n.count(".") + 2)}


def _walk(pending: list[str], src: Path, package: str, found: dict[str, Path]) -> dict[str, Path]:
    """``found`` with every module of ``package`` under ``src`` that ``pending`` names or imports."""
    while pending:
        name = pending.pop()
        path = _module_file(name, src, package)
        if path is None or name in found:
            continue
        found[name] = path
        pending += sorted(_imported(name, path.name == "__init__.py", _parsed(path)[1]) - set(found))
    return found


def imported_modules(script: Path, src: Path) -> dict[str, Path]:
    """Every cotdyn module ``script`` imports, directly or through others, by name, from ``src``."""
    found = _walk(sorted(_imported("__main__", False, _parsed(Path(script))[1])), src, PACKAGE, {})
    return dict(sorted(found.items()))


def plugin_modules(groups) -> dict[str, Path]:
    """The modules of every installed plugin of ``groups`` that is not cotdyn's own: its entry point's
    module and the modules of its own top-level package that it imports, keyed "<group>:<module>".
    A plugin whose module cannot be found is left out (loading it fails anyway, naming it)."""
    from cotdyn import plugins

    found: dict[str, Path] = {}
    for group in sorted(groups):
        for plugin in plugins.entry_points(group)[0]:
            if plugin.distribution == PACKAGE:
                continue
            origin = _origin(plugin.module)
            if origin is None:
                continue
            depth = plugin.module.count(".") + (origin.name == "__init__.py")
            top = plugin.module.split(".")[0]
            modules = _walk([plugin.module], origin.parents[depth], top, {})
            found.update({f"{group}:{name}": path for name, path in modules.items()})
    return dict(sorted(found.items()))


def _origin(module: str) -> Path | None:
    """The source file of ``module``, found without importing it; None if there is none."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec else None
    return Path(origin) if origin and origin.endswith(".py") else None


def plugin_groups(script: Path, modules: dict[str, Path]) -> list[str]:
    """The plugin groups whose plugins the script's job runs: those whose registry the script or one
    of its modules imports (``PLUGIN_REGISTRIES``)."""
    readers = {"__main__": script, **modules}
    imports = {name: _imported(name, path.name == "__init__.py", _parsed(path)[1]) for name, path in readers.items()}
    return sorted(
        group
        for group, (registry, finders) in PLUGIN_REGISTRIES.items()
        if any(registry in names for name, names in imports.items() if name not in (registry, *finders))
    )


def code_hash(script: str | Path, src: str | Path) -> str:
    """sha256 of the normalised script, of every cotdyn module it imports (``imported_modules``), by
    module name, and of the plugins of the groups it reads (``plugin_groups``, ``plugin_modules``):
    the same code hashes the same wherever the checkout lies."""
    digest = hashlib.sha256()
    modules = imported_modules(Path(script), Path(src))
    plugins = plugin_modules(plugin_groups(Path(script), modules))
    for name, path in {"<script>": Path(script), **modules, **plugins}.items():
        digest.update(f"{name}\0{_parsed(path)[0]}\0".encode())
    return digest.hexdigest()
