"""The raw files' seals as the run plans, and the derived tables a kill left unreadable.

Every rule reading chains or samples takes them through ``Seals.sealed``, so a tampered file stops
the run, named, before any job derives from it (cotdyn.provenance.seal). ``workflow`` is Snakemake's
(its ``is_main_process``, ``executor_plugin`` and ``dryrun``, read when a job is planned).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cotdyn.provenance.seal import SealError, check_sealed, seal_path, unreadable_tables


class Seals:
    def __init__(self, workflow):
        self.workflow = workflow
        self.checked: set[tuple[str, tuple]] = set()  # (path, mtimes of the file and its seal)

    def sealed(self, path: str) -> str:
        """``path``, once its seal shows generation wrote it. A file not there yet passes (it is
        generated); each version of a file is checked once."""
        from snakemake.exceptions import WorkflowError

        if not self.workflow.is_main_process:  # a job's own process: the run checked when it planned, the script checks
            return path
        stats = tuple(p.stat().st_mtime_ns if p.exists() else None for p in (Path(path), seal_path(path)))
        if stats[0] is not None and (path, stats) not in self.checked:
            try:
                check_sealed(path)
            except SealError as e:
                if getattr(self.workflow, "executor_plugin", None) is None:  # --report and the like run no job: warn
                    print(f"cotdyn: WARNING: {e}", file=sys.stderr)
                    return path
                raise WorkflowError(f"cotdyn: {e}") from None
            self.checked.add((path, stats))
        return path


class DamagedTables:
    """An input function of the records rule that adds no input. On its first call, as the run plans,
    a derived table a kill or a careless hand left unreadable (cotdyn.provenance.seal.unreadable_tables)
    is dated back to the epoch, older than its inputs, so its rule rebuilds it. Only a run that
    executes jobs does so; a dry run (or --summary, --report) writes nothing and names the table."""

    def __init__(self, workflow, study_dir: str):
        self.workflow = workflow
        self.study_dir = study_dir
        self.looked = False

    def look(self, wildcards) -> list:
        if self.workflow.is_main_process and not self.looked:
            self.looked = True
            executes = self.workflow.executor_plugin is not None and not self.workflow.dryrun
            for damaged, why in unreadable_tables(self.study_dir):
                then = "its rule rebuilds it" if executes else "a run (not this one, which writes nothing) rebuilds it"
                print(f"cotdyn: {damaged} is damaged ({why}); {then}", file=sys.stderr)
                if executes:
                    os.utime(damaged, (0, 0))
        return []
