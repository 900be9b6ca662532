"""The audit on two cores (issue 52 item 6; docs/design.md section 7).

The audit re-derives the study in its own process. Beside it a second process does the two parts
that need neither pandas nor the analysis libraries, so that it adds some 100 MB of memory rather
than a second audit's 300: each cache folder's rows as digests (``audit.cache_rows.folder_rows``)
and math-verify's verdicts on the grading page's pairs (``grading.symbolic.math_verify_verdicts``).
Each job's result is the same whichever process computes it, so the report is the same with one
process or two.

The second process is a fresh interpreter (``python -m cotdyn.audit.parallel FOLDER``), not a
fork: it shares no memory, and a script that imports the audit (a Snakemake rule's) is not run
again in it. A job and its result pass as pickles through the audit's own scratch folder; the
audit names each job on the process's standard input once it is written there, and the process
names each result on its standard output once written. Only names go through the pipes, so
neither process waits on the other to read. Once every job is asked, the audit closes the second
process's input, and it ends when it has answered them. This module imports nothing heavier than the
standard library, since the second process runs it.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Callable

from cotdyn.files.arrow_memory import freeing_environment


class SideFailed(RuntimeError):
    """The second process ended before it gave a result (killed, out of memory)."""


def cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Side:
    """Jobs for a second process when ``processes`` > 1; with one process, each job runs here when
    its answer is asked for."""

    def __init__(self, folder: Path, processes: int):
        self.folder, self.proc, self.jobs, self.written = Path(folder), None, {}, set()
        if processes > 1:
            command = [sys.executable, "-m", "cotdyn.audit.parallel", str(self.folder)]
            env = freeing_environment(os.environ)
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, name: str, function: Callable, *args) -> None:
        """Start ``function(*args)`` (a function of a module the second process can import) as job
        ``name`` (a file name)."""
        self.jobs[name] = (function, args)
        if self.proc is None:
            return
        (self.folder / f"{name}.job").write_bytes(pickle.dumps((function, args)))
        try:
            self.proc.stdin.write(name + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:  # it has ended: answer() says so
            pass

    def asked_all(self) -> None:
        """No more jobs: the second process ends once it has written their results, and its memory
        is freed before the audit's own reaches its peak (the analysis, after the records)."""
        if self.proc is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:  # it has ended: answer() says so
                pass

    def answer(self, name: str):
        """Job ``name``'s result, or its exception raised here; ``SideFailed`` where the second process
        ended before writing it."""
        if self.proc is None:
            function, args = self.jobs[name]
            return function(*args)
        while name not in self.written:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                raise SideFailed(
                    f"the audit's second process failed (exit status {self.proc.returncode}; its error is printed above)"
                )
            self.written.add(line.rstrip("\n"))
        ok, result = pickle.loads((self.folder / f"{name}.result").read_bytes())  # that process's, in our scratch
        if not ok:
            raise result
        return result

    def stop(self) -> None:
        """End the second process: its answers were read, or the audit was interrupted or failed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def outcome(function: Callable, args: tuple) -> tuple[bool, object]:
    """(True, ``function(*args)``), or (False, the exception it raised, as one that pickles)."""
    try:
        return True, function(*args)
    except Exception as e:  # noqa: BLE001 (raised again in the audit's process, which names it)
        try:
            pickle.dumps(e)
        except Exception:  # noqa: BLE001
            e = RuntimeError(f"{type(e).__name__}: {e}")
        return False, e


def main(folder: str) -> None:
    folder_path = Path(folder)
    # the names go out on a copy of standard output; anything a job's libraries print goes to stderr
    names = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    for line in sys.stdin:
        name = line.rstrip("\n")
        function, args = pickle.loads((folder_path / f"{name}.job").read_bytes())  # the audit's own pickle
        written = folder_path / f"{name}.result.tmp"
        written.write_bytes(pickle.dumps(outcome(function, args)))
        os.replace(written, folder_path / f"{name}.result")
        print(name, file=names, flush=True)


if __name__ == "__main__":  # run as a module: its jobs' functions pickled under their package's name
    from cotdyn.audit import parallel

    parallel.main(sys.argv[1])
