"""pyarrow's memory, handed back to the system as tables are freed (issue 52 item 6).

pyarrow's default allocator (mimalloc) keeps freed memory for reuse, so a process that reads one
table after another (the audit reads each cell's chains and samples in turn) ends holding about
the largest of them and more; with jemalloc, which returns freed pages after a short decay, the
panel-sized audit of benchmarks/bench_audit.py peaks some 150 MB lower in one process, at the same
speed. pyarrow reads the choice from ``ARROW_DEFAULT_MEMORY_POOL`` once, when it is first imported
(``pyarrow.set_memory_pool`` later leaves the parquet reader's own allocations where they were),
so it is set before anything imports pyarrow: by the ``cotdyn`` command (cotdyn.cli) and rule
audit_result's script. A value already set wins.
This module imports nothing that imports pyarrow.
"""

from __future__ import annotations

import os

VARIABLE, POOL = "ARROW_DEFAULT_MEMORY_POOL", "jemalloc"


def free_arrow_memory() -> None:
    """Choose the pool for this process; too late (without effect) once pyarrow is imported."""
    os.environ.setdefault(VARIABLE, POOL)
