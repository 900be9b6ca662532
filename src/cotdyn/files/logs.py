"""Send a Snakemake job's stdout and stderr (progress bars included) to its log and the console."""

from __future__ import annotations

import os
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
    # O_NOFOLLOW: a link placed at the log's path is refused, never written through
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    log = open(fd, "w", buffering=1)
    sys.stdout = _Tee(sys.__stdout__, log)
    sys.stderr = _Tee(sys.__stderr__, log)
