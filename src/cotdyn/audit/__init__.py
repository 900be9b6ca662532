"""The reviewer's audit of a finished study (docs/reference.md section 7; ``cotdyn.audit.check``).

``cotdyn.audit`` is both this package and the Python API's call: ``cotdyn.audit(path, ...)`` runs
the audit as ``cotdyn.api.audit`` does. Python binds a loaded subpackage to its parent's attribute, so the package
itself is made callable rather than shadowing the call.
"""

import sys
import types


class _Callable(types.ModuleType):
    def __call__(self, path, *, plan=None, cache=None, tsa_ca=None, pages: bool = True):
        """The audit's report as an object (``cotdyn.api.audit`` documents it)."""
        import importlib  # not an import statement: a job that imports one audit module hashes that one only

        return importlib.import_module("cotdyn.audit.check").audit(path, plan, cache=cache, pages=pages, tsa_ca=tsa_ca)


sys.modules[__name__].__class__ = _Callable
