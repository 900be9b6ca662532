"""Every module of the library is imported by the fast tier (`pytest -m "not slow"`), so a module that
no longer loads (a broken import, a name it imports that moved) fails in the inner loop, not only in the
slow tests that run a model or a whole study."""

import importlib
from pathlib import Path

import cotdyn

SRC = Path(cotdyn.__file__).parent


def _module_names() -> list[str]:
    """Every module's name, from the files (pkgutil's walk would skip a package that fails to import)."""
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_of_the_library_imports():
    names = _module_names()
    assert len(names) > 100 and "cotdyn.records.contract" in names  # the walk found the tree
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 -- every failure is reported, named by its module
            failed[name] = f"{type(error).__name__}: {error}"
    assert failed == {}
