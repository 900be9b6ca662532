"""cotdyn: chain-of-thought answer-entropy trajectories, measured reproducibly.

From Python (``cotdyn.api``, loaded on first use so that ``import cotdyn`` stays light):
``cotdyn.open_study(path)``, ``cotdyn.audit(path, ...)`` and ``cotdyn.analyze(records, plan)``.
"""

from importlib.metadata import PackageNotFoundError, version

try:  # pyproject.toml's, as the installed distribution records it (one place for the number)
    __version__ = version("cotdyn")
except PackageNotFoundError:  # a source tree on the path, never installed
    __version__ = "unknown"
__all__ = ["open_study", "audit", "analyze", "__version__"]


def __getattr__(name: str):
    if name in ("open_study", "audit", "analyze", "Study"):
        # importlib, not an import statement: every job's code hash follows the import statements of
        # the modules it reaches (cotdyn.provenance.code), and no job reaches the API through here
        import importlib

        return getattr(importlib.import_module("cotdyn.api"), name)
    raise AttributeError(f"module 'cotdyn' has no attribute {name!r}")
