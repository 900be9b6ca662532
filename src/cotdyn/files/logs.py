"""Send a Snakemake job's stdout and stderr (progress bars included) to its log and the console."""

from __future__ import annotations

import sys
from pathlib import Path


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
            s.flush()
        return len(text)

    def flush(self):
        for s in self.streams:
            s.flush()

    def isatty(self):
        return False


def tee_to(log_path: str | Path) -> None:
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w", buffering=1)
    sys.stdout = _Tee(sys.__stdout__, log)
    sys.stderr = _Tee(sys.__stderr__, log)
