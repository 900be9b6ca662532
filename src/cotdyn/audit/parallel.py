"""The audit on two cores (issue 52 item 6; docs/design.md section 7).

Beside the re-derivation of the analysis, which the audit's own process runs, a second process
checks what needs none of it: every raw file against its seal and the generation cache, and every
samples row's seed from the requests read there (``raw.raw_checks``), and the grading tables and
page (``derive_outputs.derive_grading``, most of it math-verify), written into the same scratch
folder. It is a fresh interpreter (``python -m cotdyn.audit.parallel JOB RESULT``), not a fork: it
shares no memory, and a script that imports the audit (a Snakemake rule's) is not run again in it.
The job and its result pass as pickles through the audit's own scratch folder. Each part's result
is the same whichever process computes it, so the report is the same with one process or two.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cotdyn.audit.derive_outputs import derive_grading
from cotdyn.audit.raw import raw_checks
from cotdyn.audit.view import StudyView
from cotdyn.files.arrow_memory import freeing_environment
from cotdyn.files.terminal import printable
from cotdyn.plan.config import ConfigError
from cotdyn.plan.registration import PreregistrationError


@dataclass(frozen=True)
class SideJob:
    view: StudyView
    scratch: Path
    config: dict
    cells: dict
    protocols: dict
    raw: dict
    cache_dir: Path | None
    cache_note: str
    honoured: dict


@dataclass(frozen=True)
class SideResult:
    seeds_checked: int
    seed_problems: list
    raw_checks: dict
    grading_problem: str | None


def side_checks(job: SideJob) -> SideResult:
    """The seed, seal, cache and grading checks of one study."""
    problem = None
    try:
        derive_grading(job.view, job.scratch, job.config, job.cells, job.protocols)
    except (ConfigError, PreregistrationError, ValueError, KeyError, OSError) as e:
        problem = f"re-derivation failed: {type(e).__name__}: {printable(str(e))[:500]}"
    models = {name: spec.model_key for name, spec in job.cells.items()}
    seeds: dict[str, tuple[int, str | None]] = {}  # checked with the raw files: their requests read once
    checks = raw_checks(job.view, job.raw, job.protocols, job.cache_dir, job.cache_note, models, seeds, job.honoured)
    problems = [seeds[path][1] for path in sorted(seeds) if seeds[path][1]]  # in the raw files' path order
    return SideResult(sum(rows for rows, _ in seeds.values()), problems, checks, problem)


def cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Side:
    """``side_checks`` of a job, in a second process when ``processes`` > 1, else in this one when its
    result is asked for."""

    def __init__(self, job: SideJob, folder: Path, processes: int):
        self.job, self.out, self.proc = job, folder / "side-result.pickle", None
        if processes > 1:
            path = folder / "side-job.pickle"
            path.write_bytes(pickle.dumps(job))
            command = [sys.executable, "-m", "cotdyn.audit.parallel", str(path), str(self.out)]
            self.proc = subprocess.Popen(command, env=freeing_environment(os.environ))

    def result(self) -> SideResult:
        """Its result; where the second process failed (killed, out of memory), a result that fails
        every raw file and the seeds, naming why, so the audit FAILs rather than passing unchecked."""
        if self.proc is None:
            return side_checks(self.job)
        if self.proc.wait() == 0 and self.out.exists():
            return pickle.loads(self.out.read_bytes())  # written by that process, in the audit's scratch
        why = f"the audit's second process failed (exit status {self.proc.returncode}; its error is printed above)"
        checks = {path: (False, f"not checked: {why}") for path in self.job.raw}
        return SideResult(0, [f"seeds, raw files and grading page not checked: {why}"], checks, None)

    def stop(self) -> None:
        """End the second process (the audit was interrupted or failed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main(job_path: str, out_path: str) -> None:
    job = pickle.loads(Path(job_path).read_bytes())  # the audit's own pickle, in its scratch folder
    Path(out_path).write_bytes(pickle.dumps(side_checks(job)))


if __name__ == "__main__":  # run as a module: its classes pickled under their package's name, not __main__'s
    from cotdyn.audit import parallel

    parallel.main(*sys.argv[1:3])
