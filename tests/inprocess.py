"""Run a study's DAG in this Python process: every job's `script:` executed in topological order.

A Snakemake run starts a fresh interpreter per job, which pays the library's imports each time (about
1 s a job, more on a loaded machine) and hides the test's own process from the jobs. Here Snakemake
still parses the workflow, validates the config and builds the DAG (so every rule's inputs, outputs,
params and wildcards are Snakemake's own); only the execution differs: each job's script is run with
the `snakemake` object Snakemake would hand it, in this process. So a change to a rule script or a
library function is checked through every rule in seconds, and what a test patches (a signal declared
with monkeypatch, say) reaches every job.

It reaches into Snakemake's workflow object (``_workflow``, ``_prepare_dag``, ``_build_dag``), which
the pinned snakemake 9 series provides; a Snakemake that changes them fails here, not silently.
Only the jobs Snakemake finds need to run are run (its rerun triggers, all by default, as a plain
`snakemake` has them), each after its old outputs are removed, as Snakemake prepares a job. It is a
test helper, not a way to run a study: no locking, no metadata recorded, no resources, no retries.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _dag(api, config: Path, workdir: Path, targets=(), rerun_triggers=None, forceall: bool = False, run=False):
    """The workflow with its DAG built, as ``snakemake [--forceall] --configfile config`` builds it;
    with ``run``, as a run that executes its jobs plans it (Snakemake's local executor chosen, which
    the workflow's checks read: a damaged table is dated back to be rebuilt, a seal error stops it)."""
    from snakemake.settings.enums import RerunTrigger
    from snakemake.settings.types import ConfigSettings, DAGSettings, ResourceSettings
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    workflow_api = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[config]),
        snakefile=ROOT / "Snakefile",
        workdir=workdir,
    )
    triggers = RerunTrigger.all() if rerun_triggers is None else {RerunTrigger[t.upper()] for t in rerun_triggers}
    settings = DAGSettings(targets=frozenset(targets), rerun_triggers=frozenset(triggers), forceall=forceall)
    workflow_api.dag(settings)  # installs the DAG settings on the workflow
    workflow = workflow_api._workflow
    if run:
        workflow._executor_plugin = ExecutorPluginRegistry().get_plugin("local")
    workflow._prepare_dag(forceall=forceall, ignore_incomplete=True, lock_warn_only=True, nolock=True)
    workflow._build_dag()
    return workflow


def planned_rules(config: Path, workdir: Path = ROOT) -> set[str]:
    """The rules of the jobs ``snakemake -n --forceall --configfile config`` plans from ``workdir``
    (a dry run without the interpreter and imports a Snakemake process starts with)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings

    here, argv = Path.cwd(), sys.argv
    os.chdir(workdir)
    sys.argv = ["snakemake", "-n", "--forceall"]  # the command line common.smk reads (cotdyn.workflow.checks)
    try:
        with SnakemakeApi(OutputSettings()) as api:
            return {
                job.rule.name
                for job in _dag(api, Path(config).resolve(), Path(workdir).resolve(), forceall=True).dag.jobs
            }
    finally:
        os.chdir(here)
        sys.argv = argv


def _dag_levels(api, config: Path, workdir: Path, targets, rerun_triggers):
    workflow = _dag(api, config, workdir, targets, rerun_triggers, run=True)
    needed = set(workflow.dag.needrun_jobs())
    return workflow, [[job for job in level if job in needed] for level in workflow.dag.toposorted()]


def _run_script(job, config: dict) -> None:
    from snakemake.script import Snakemake

    script = Path(job.rule.basedir.get_path_or_uri(secret_free=True)) / job.rule.script
    for path in map(Path, [*job.output, *job.log]):  # as Snakemake prepares a job: old outputs go
        path.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
    handed = Snakemake(
        job.input, job.output, job.params, job.wildcards, job.threads, job.resources, job.log, config,
        job.rule.name, None, scriptdir=str(script.parent),
    )  # fmt: skip
    stdout, stderr = sys.stdout, sys.stderr
    try:
        exec(compile(script.read_text(), str(script), "exec"), {"snakemake": handed, "__name__": "__main__"})
    finally:
        tee = sys.stdout  # the script's tee_to replaced both streams; put them back, close its log
        sys.stdout, sys.stderr = stdout, stderr
        for stream in getattr(tee, "streams", ())[1:]:
            stream.close()


def run_study(
    config: Path, workdir: Path, targets: tuple[str, ...] = (), rerun_triggers: list[str] | None = None
) -> dict[str, float]:
    """Run the jobs of ``targets`` (rules or files; the default target when empty) under ``config``
    that Snakemake finds need to run from ``workdir`` (``rerun_triggers``: its --rerun-triggers, all
    by default); the seconds each rule's jobs took."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings

    here = Path.cwd()
    os.chdir(workdir)  # Snakemake's paths are relative to the working directory
    try:
        with SnakemakeApi(OutputSettings()) as api:
            workflow, levels = _dag_levels(
                api, Path(config).resolve(), Path(workdir).resolve(), targets, rerun_triggers
            )
            seconds: dict[str, float] = {}
            for level in levels:
                for job in level:
                    if job.rule.script is None:  # rule all
                        continue
                    start = time.perf_counter()
                    _run_script(job, workflow.config)
                    seconds[job.rule.name] = seconds.get(job.rule.name, 0.0) + time.perf_counter() - start
            return seconds
    finally:
        os.chdir(here)
