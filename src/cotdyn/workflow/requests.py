"""What a generation job asks a cluster for (docs/cluster.md), and the check, before a SLURM run's
first submission, that some node of its partition can meet each job's request (SLURM would leave it
pending for ever, Reason=PartitionConfig).
"""

from __future__ import annotations

import subprocess

from cotdyn.workflow.study import Study

# The model entry's `resources`, else these defaults, by where the model runs; runtime in minutes,
# per phase. A GPU (and the entry's gpu_model) only for a model on CUDA: the rules decide, the SLURM
# profile does not override them. threads stay 2 (the intra-op threads the samples were produced
# with); cpus is the allocation.
GENERATION_REQUESTS = {
    "cpu": {"cpus": 2, "mem_mb": 8000, "runtime": {"reference": 240, "continuations": 240}},
    "cuda": {"cpus": 8, "mem_mb": 64000, "runtime": {"reference": 120, "continuations": 360}},
}


def is_gpu(model: dict) -> bool:
    return model.get("device", "cpu").startswith("cuda")


def generation_request(model: dict, phase: str) -> dict:
    """A model entry's generation request in ``phase``: cpus, mem_mb, runtime, gpu, gpu_model, partition."""
    asked = model.get("resources", {})
    cuda = is_gpu(model)
    defaults = GENERATION_REQUESTS["cuda" if cuda else "cpu"]
    runtime = asked.get("runtime", {})
    if isinstance(runtime, dict):
        runtime = runtime.get(phase, defaults["runtime"][phase])
    return {
        "cpus": asked.get("cpus", defaults["cpus"]),
        "mem_mb": asked.get("mem_mb", defaults["mem_mb"]),
        "runtime": runtime,
        "gpu": 1 if cuda else 0,
        "gpu_model": asked.get("gpu_model") if cuda else None,
        "partition": asked.get("partition"),
    }


def scaled(request: int, attempt: int) -> int:
    """A memory or time request on the job's ``attempt``: 1x, 1.5x, 2x (retries: 2), so a job killed
    for memory or time asks for more when it is submitted again. The SLURM profile's
    default-resources write the same rule as an expression (`1000 * (attempt + 1)` for 2000 MB)."""
    return request * (attempt + 1) // 2


def generation_resources(study: Study, phase: str) -> dict:
    """The ``resources`` of a generation rule, memory and time scaled by the attempt (scaled). A
    request left unset (None) is dropped by Snakemake; slurm_partition is a resource only when some
    model names a partition, so that otherwise the plugin picks the partition (profiles/slurm)."""

    def request(w) -> dict:
        return generation_request(study.cells[w.cell].model, phase)

    resources = {
        "gpu": lambda w: request(w)["gpu"],
        "gpu_model": lambda w: request(w)["gpu_model"],
        "cpus_per_task": lambda w: request(w)["cpus"],
        "mem_mb": lambda w, attempt: scaled(request(w)["mem_mb"], attempt),
        "runtime": lambda w, attempt: scaled(request(w)["runtime"], attempt),
    }
    if any("partition" in m.get("resources", {}) for m in study.config["models"].values()):
        resources["slurm_partition"] = lambda w: request(w)["partition"]
    return resources


def unmet_requests(jobs, nodes) -> dict[str, list[str]]:
    """``{what is unmet: the jobs' wildcards}`` of the Snakemake ``jobs`` (a group job among them)
    whose request no node of their partition meets (cotdyn.plan.cluster.unmet)."""
    from cotdyn.plan.cluster import unmet

    problems: dict[str, list[str]] = {}
    for job in jobs:
        r = job.resources
        request = {"cpus": r.get("cpus_per_task") or job.threads, "mem_mb": r.get("mem_mb"), "gpu": r.get("gpu")}
        request["gpu_model"] = r.get("gpu_model")
        why = unmet(request, r.get("slurm_partition"), nodes)
        if why and job.is_group():
            problems.setdefault(f"group {job.groupid}: {why}", []).append(f"{len(job.jobs)} jobs")
        elif why:
            problems.setdefault(f"rule {job.rule.name}: {why}", []).append(str(job.wildcards))
    return problems


def submitted_jobs(dag) -> list:
    """What a cluster run submits: each group job, and each job it runs outside a group and off the
    login node (its localrules), as Snakemake forms them (dag.get_jobs_or_groups)."""
    return [
        job
        for job in dag.get_jobs_or_groups()
        if job.is_group() or (dag.needrun(job) and not job.is_local and job.rule.name != "all")
    ]


def hold_groups_to_nodes(workflow, nodes) -> int:
    """Size every group job to the largest node it can go to: Snakemake sums the CPUs and memory of
    the group's components that run at once, up to the run's ``cores`` (the profile's), which may be
    more than any node has; held to the node's CPUs (cotdyn.plan.cluster.group_width), it runs fewer
    components at once and asks for what a node can give. The width, in CPUs."""
    from cotdyn.plan.cluster import group_width

    cores = workflow.global_resources["_cores"].value
    width = group_width(nodes, None, cores or max(n.cpus for n in nodes))
    workflow.global_resources["_cores"] = width
    for job in workflow.dag.get_jobs_or_groups():
        if job.is_group():
            # a group's resources are computed once, on first use, against the run's resources
            # (Snakemake 9.27 GroupJob.resources); forget any computed before the width was set
            job._resources = None
            job._scheduler_resources = None
    return width


def sinfo_nodes(run=subprocess.run):
    """The cluster's nodes as sinfo lists them, or a sentence saying why they cannot be read."""
    from cotdyn.plan.cluster import SINFO_FORMAT, parse_sinfo

    try:
        sinfo = run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot check the jobs' requests against the nodes: {e}"
    nodes = parse_sinfo(sinfo.stdout)
    if sinfo.returncode != 0 or not nodes:
        return f"cannot check the jobs' requests against the nodes: sinfo said {sinfo.stderr.strip()!r}"
    return nodes


def refuse_requests_no_node_meets(workflow, run=subprocess.run) -> None:
    """On a SLURM run, before the first submission: hold the group jobs to the nodes, then stop when a
    job or a group job asks for more than any node of its partition has; elsewhere, nothing."""
    from snakemake.exceptions import WorkflowError

    if workflow.executor_plugin is None or workflow.executor_plugin.name != "slurm":
        return
    nodes = sinfo_nodes(run)
    if isinstance(nodes, str):
        print(nodes)
        return
    width = hold_groups_to_nodes(workflow, nodes)
    print(f"cotdyn: a grouped job runs at most {width} CPUs of components at once (the largest node it can go to)")
    problems = unmet_requests(submitted_jobs(workflow.dag), nodes)
    if problems:
        lines = [f"{what} (jobs: {', '.join(sorted(set(w))[:4])})" for what, w in problems.items()]
        raise WorkflowError(
            "requests no node can meet (they would pend for ever); lower them in the model entry's "
            "`resources` or the profile (docs/cluster.md):\n  " + "\n  ".join(lines)
        )
