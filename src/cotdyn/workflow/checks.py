"""What a run checks before it plans a job, at a dry run too (workflow/rules/common.smk).

Plan drift, a local benchmark file whose rows do not read, and a generation past the study's token
budget each stop the run as the workflow is read, in one line naming the study's own files, rather
than in a job minutes later. A reviewer's `snakemake audit` or `--report` reads a drifted plan to
name the drift, so it skips these checks.
"""

from __future__ import annotations

from cotdyn.workflow.study import Study, StudyError

# the targets and options of a command line that reviews a study rather than runs it
REVIEWING_TARGETS = ("audit", "audit_result", "--report")


def reviewing(argv) -> bool:
    """Whether the command line reviews a study (`snakemake audit`, `--report`). The command line is
    read, as in report.smk: Snakemake 9.27 sets the targets on `workflow` only after the Snakefile is
    read (api.DAGApi, workflow.dag_settings)."""
    return any(arg in REVIEWING_TARGETS or arg.startswith("--report=") for arg in argv)


def check_plan_drift(study: Study) -> None:
    """An edited plan or an undeclared deviation of a confirmatory cell, refused naming the study's own
    plan and deviations.yaml; the check_plan job repeats it and records the result
    (cotdyn.plan.registration.plan_check)."""
    from cotdyn.plan.config import confirmatory_cells
    from cotdyn.plan.registration import plan_check

    confirmatory = confirmatory_cells(study.config)  # none in a study under `limit:` (descriptive)
    try:
        plan_check(study.plan_path, study.cell_names, confirmatory, study.protocols, study.plan)
    except ValueError as e:  # PreregistrationError, and a token or time lock that does not hold
        raise StudyError(f"plan of {study.source}: {e}") from None


def check_local_benchmarks(study: Study) -> None:
    """Each local benchmark file's rows, as the problems job reads them (cotdyn.dataset.benchmarks)."""
    from cotdyn.dataset.benchmarks import BenchmarkError, check_local_rows

    for key in study.benchmarks:
        try:
            check_local_rows(next(c.benchmark for c in study.cells.values() if c.benchmark_key == key))
        except BenchmarkError as e:
            raise StudyError(f"{study.source}: benchmarks.{key}: {e}") from None
        except OSError as e:
            raise StudyError(f"{study.source}: benchmarks.{key}: {e.filename}: {e.strerror or e}") from None


def check_token_budget(study: Study) -> None:
    """The generation's upper bound against the study's token budget (cotdyn.generation.estimate)."""
    from cotdyn.generation.estimate import BudgetError, check_token_budget, registered_sizes

    try:
        check_token_budget(
            study.config["study"],
            study.cells,
            study.protocols,
            study.generating,
            registered_sizes(study.plan),
            study.config.get("token_budget"),
        )
    except BudgetError as e:
        raise StudyError(f"{study.source}: {e}") from None


def dry_run(argv) -> bool:
    """Whether the command line asks for a dry run (``-n``, ``-np``, ``--dry-run``, ``--dryrun``)."""
    return any(
        arg in ("--dry-run", "--dryrun") or (arg[:1] == "-" and arg[1:2] != "-" and "n" in arg[1:]) for arg in argv
    )


def check_backend_dependencies(study: Study, argv) -> None:
    """Each package the study's backends declare (``requires``), installed here in range: without
    Snakemake's conda environments the generation jobs run in this one, and a missing package was a
    traceback of the first generation job. A run stops here, naming it; a dry run names it on
    stderr and plans on (a panel is planned on a laptop that will not run its vLLM jobs)."""
    import sys

    from cotdyn.generation.backends import registry
    from cotdyn.plugins import MissingDependency

    for key in sorted({cell.model_key for cell in study.cells.values()}):
        model = next(cell.model for cell in study.cells.values() if cell.model_key == key)
        try:
            registry.check_requires(registry.spec(model["backend"]))
        except MissingDependency as e:
            problem = f"{study.source}: models.{key}: {e} (snakemake --sdm conda)"
            if not dry_run(argv):
                raise StudyError(problem) from None
            print(f"cotdyn: a run here would stop: {problem}", file=sys.stderr)


def check_before_planning(study: Study, is_main_process: bool, argv, in_conda_envs: bool = False) -> None:
    """Every check above, in the run's own process (a job's process was planned by it) and unless the
    command line reviews the study; ``in_conda_envs``: the jobs run in the conda environments their
    backends' declarations name (``--sdm conda``), so their packages are not this environment's."""
    if is_main_process and not reviewing(argv):
        check_plan_drift(study)
        check_local_benchmarks(study)
        check_token_budget(study)
        if not in_conda_envs:
            check_backend_dependencies(study, argv)
