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


def check_before_planning(study: Study, is_main_process: bool, argv) -> None:
    """Every check above, in the run's own process (a job's process was planned by it) and unless the
    command line reviews the study."""
    if is_main_process and not reviewing(argv):
        check_plan_drift(study)
        check_local_benchmarks(study)
        check_token_budget(study)
