"""What a run prints before its first job: the paths it reads and writes, what it will generate
and how long that should take; and the SLURM request check (cotdyn.workflow.requests)."""

from __future__ import annotations

from cotdyn.workflow.params import model_for
from cotdyn.workflow.paths import given_paths
from cotdyn.workflow.requests import refuse_requests_no_node_meets
from cotdyn.workflow.study import Study

GENERATION_RULES = ("reference", "continuations")


def generation_jobs(study: Study, jobs) -> list[tuple]:
    """The generation jobs among Snakemake's ``jobs``, as cotdyn.generation.estimate.run_summary takes
    them: (rule, cell, reference or variant, its protocol, the threads Snakemake gives the job)."""
    out = []
    for job in jobs:
        if job.rule.name not in GENERATION_RULES:
            continue
        w = job.wildcards
        reference = job.rule.name == "reference"
        protocol = study.references[w.ref] if reference else study.protocols[w.variant]
        out.append((job.rule.name, w.cell, w.ref if reference else w.variant, protocol, job.threads))
    return out


def start_of_run(study: Study, workflow) -> None:
    """The paths, the SLURM request check over the jobs the run will execute, then the estimate."""
    from cotdyn.generation.estimate import registered_sizes, run_summary

    print("\n".join(["cotdyn: the paths of this run, resolved:", *given_paths(study)]))
    jobs = list(workflow.dag.needrun_jobs())
    refuse_requests_no_node_meets(workflow)
    models = {cell: model_for(study, cell) for cell in study.cell_names}
    summary = run_summary(
        study.config["study"],
        study.cells,
        study.protocols[study.variants[0]],
        study.cache,
        registered_sizes(study.plan),
        generation_jobs(study, jobs),
        models,
    )
    print("\n".join(summary))
