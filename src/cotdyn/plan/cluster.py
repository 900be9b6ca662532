"""Whether a job's cluster request fits a node (docs/cluster.md): the check the workflow runs on a
SLURM run's jobs before the first submission, so that a request no node of its partition can meet
stops the run with a message instead of pending for ever (SLURM's Reason=PartitionConfig).

Pure: ``parse_sinfo`` reads the output of ``sinfo -h -N -o "%R|%c|%m|%G"`` (partition, CPUs,
memory in MB, generic resources per node); ``unmet`` compares one request with those nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SINFO_FORMAT = "%R|%c|%m|%G"


@dataclass(frozen=True)
class Node:
    partition: str
    cpus: int
    mem_mb: int
    gpus: dict[str, int]  # GPU type ("" when untyped) -> count


def _gpus(gres: str) -> dict[str, int]:
    """``gpu:h100:4(S:0-1),gpu:2`` -> {"h100": 4, "": 2}; other generic resources are ignored."""
    out: dict[str, int] = {}
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item.strip()).split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        kind, count = ("", parts[1]) if len(parts) == 2 else (parts[1], parts[2])
        digits = re.match(r"\d+", count)
        if digits:
            out[kind] = out.get(kind, 0) + int(digits.group())
    return out


def parse_sinfo(text: str) -> list[Node]:
    nodes = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4 or not fields[1].isdigit():
            continue
        mem = re.match(r"\d+", fields[2])
        nodes.append(Node(fields[0].rstrip("*"), int(fields[1]), int(mem.group()) if mem else 0, _gpus(fields[3])))
    return nodes


def unmet(request: dict, partition: str | None, nodes: list[Node]) -> str | None:
    """None when some node of ``partition`` (every node when None) can meet ``request`` (cpus, mem_mb,
    gpu, gpu_model); else what is asked against the largest node there, in words."""
    pool = [n for n in nodes if partition is None or n.partition == partition]
    where = f"partition '{partition}'" if partition else "the cluster"
    if not pool:
        return f"{where} has no nodes (sinfo lists partitions {sorted({n.partition for n in nodes})})"
    cpus, mem, gpus, kind = (request.get(k) for k in ("cpus", "mem_mb", "gpu", "gpu_model"))

    def fits(node: Node) -> bool:
        have_gpus = node.gpus.get(kind, 0) if kind else sum(node.gpus.values())
        return (cpus or 0) <= node.cpus and (mem or 0) <= node.mem_mb and (gpus or 0) <= have_gpus

    if any(fits(n) for n in pool):
        return None
    largest = max(pool, key=lambda n: (n.cpus, n.mem_mb))
    asked = f"{cpus or 0} CPUs, {mem or 0} MB" + (f", {gpus} GPU ({kind or 'any type'})" if gpus else "")
    has = f"{largest.cpus} CPUs, {largest.mem_mb} MB, GPUs {largest.gpus or 'none'}"
    return f"asks for {asked}; no node of {where} has that (the largest: {has})"


def group_width(nodes: list[Node], partition: str | None, cores: int) -> int:
    """The most CPUs a grouped job may ask for: the profile's ``cores``, held to the largest node it
    can be sent to (its partition's, else a node without GPUs, as the SLURM plugin prefers for a CPU
    job, else any). Snakemake then runs only as many of the group's components at once as fit,
    which also bounds the memory the group asks for (the sum over the components run at once)."""
    pool = [n for n in nodes if n.partition == partition] if partition else [n for n in nodes if not n.gpus]
    pool = pool or nodes
    return max(1, min(cores, max((n.cpus for n in pool), default=cores)))
