"""The kill-and-resume tests' one way to run a study and kill it: in a child process of a
multiprocessing context (each test module's forkserver, preloading what it generates with), killed
with SIGKILL once a file the study writes holds so many lines, a moment the study itself marks."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def log_to(out: Path) -> None:
    """The child's stdout and stderr into ``out``/run.log, which a failing test shows."""
    out.mkdir(parents=True, exist_ok=True)
    log = os.open(out / "run.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)


def run_killed(context, target, args: dict, marks: Path, kill_at: int | None, timeout: float) -> int | None:
    """Run ``target(args)``; with ``kill_at``, SIGKILL it once ``marks`` has that many lines. Its exit code."""
    process = context.Process(target=target, args=(args,))
    process.start()
    if kill_at is not None:
        while process.is_alive() and (not marks.exists() or marks.read_bytes().count(b"\n") < kill_at):
            time.sleep(0.002)
        if process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=timeout)
    return process.exitcode


def stopping_transformers(model_dir, share_prefill: bool):
    """The transformers backend on ``model_dir`` (batches of 8, float32) with a twentieth of the
    vocabulary stopping a row, so rows of a batch end at different steps, some at the budget."""
    from cotdyn.generation.backends import make_backend

    backend = make_backend(
        {
            "backend": "transformers",
            "id": str(model_dir),
            "dtype": "float32",
            "transformers": {"batch_size": 8, "share_prefill": share_prefill},
        }
    )
    backend.stop_ids = set(range(2, len(backend.tokenizer.hf), 20)) | backend.stop_ids
    return backend
