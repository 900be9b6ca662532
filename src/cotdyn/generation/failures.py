"""A generation job that a backend's failure stops ends with one named line, no traceback.

A server's error (``BackendFailure``: a wrong model name, an HTTP error, a malformed answer, a
server gone) is about the server, not about cotdyn's code: the rule's log and the terminal get
``<job>: <what failed>`` and the job exits 1. Every other exception keeps its traceback.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from cotdyn.generation.backends.base import BackendFailure


@contextmanager
def one_line_failures(job: str):
    """Turn a ``BackendFailure`` raised inside into ``SystemExit("<job>: <message>")``: Python prints
    that message alone, on stderr (the job's log, where cotdyn.files.logs.tee_to sends stderr)."""
    try:
        yield
    except BackendFailure as e:
        sys.stdout.flush()
        raise SystemExit(f"{job}: {e}") from None
