"""The SLURM path for real (docs/cluster.md): a one-node cluster of Debian's slurm-wlm with slurmdbd
accounting (tests/slurm_cluster.py, installed with apt-get when absent; skipped, with the reason,
only where that is impossible) runs a tiny simulated study through profiles/slurm, and every
output equals a local ``--cores 2`` run of the same config (timing fields aside), with the audit
passing, through a job failing, a job cancelled, a job preempted (requeued) and the controller
killed mid-run, all in one run. Also: a request no node can meet is refused before anything
is submitted, and a GPU is asked for only where the model runs on CUDA. (First writer wins, the
rule that keeps an orphan and its resubmission from replacing each other's outputs, is tested with
racing processes in tests/test_tamper.py.)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from cotdyn.plan.cluster import Node, group_width, parse_sinfo, unmet

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
STUDY = "t"
# Status checks every 2 s instead of the profile's 40 (a timing knob only; the rest is the profile).
FAST = ["--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2"]
# What the local run took (the accident run reports it beside its own).
WALL_SECONDS: dict[str, float] = {}


def study_config(**model) -> dict:
    """One cell of 16 GSM8K problems, the simulated model misbehaving as real ones do, its
    continuations in chunks (so a requeued job resumes from the cache)."""
    return {
        "study": STUDY,
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": "cache",  # in each run's folder; the config file is the same for every run
        "cells": ["sim-gsm8k"],
        "models": {"sim": {"backend": "simulated", "chunk_size": 200, "planted": {"unanswered_rate": 0.1}, **model}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 16}},
        "extras": [],  # the registered study: the cluster's path, not what it computes, is on trial
    }


def write_study(root: Path, **model) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study_config(**model)))
    return path


def job_env(extra: dict | None = None) -> dict:
    # the jobs import this checkout's cotdyn (sbatch --export=ALL carries the environment)
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, **(extra or {}), "PYTHONPATH": path}


def snakemake_cmd(*args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--workflow-profile",
        "none",
        *args,
    ]


def slurm_profile(root: Path, cluster) -> Path:
    """profiles/slurm as shipped (its groups, its localrules in the workflow), its CHANGE_ME values
    set to this cluster's: the account, and in partitions.yaml the one partition with the node's
    CPUs and memory. Its `cores` (the most CPUs a grouped job asks for) stays above the node's: the
    workflow holds the group to the node (cotdyn.workflow.requests.hold_groups_to_nodes)."""
    from slurm_cluster import NODE_CPUS, NODE_MEMORY_MB

    text = (ROOT / "profiles" / "slurm" / "config.yaml").read_text()
    assert "CHANGE_ME_account" in text
    profile = yaml.safe_load(text.replace("CHANGE_ME_account", cluster.account))
    assert profile["cores"] > NODE_CPUS and profile["slurm-partition-config"] == "partitions.yaml"
    shipped = yaml.safe_load((ROOT / "profiles" / "slurm" / "partitions.yaml").read_text())
    assert set(shipped["partitions"]) == {"CHANGE_ME_cpu", "CHANGE_ME_gpu"}
    partitions = {
        "cpu": {**shipped["partitions"]["CHANGE_ME_cpu"], "max_threads": NODE_CPUS, "max_mem_mb": NODE_MEMORY_MB}
    }
    folder = root / "profile"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    (folder / "partitions.yaml").write_text(yaml.safe_dump({"partitions": partitions}))
    return folder


def slurm_run(root: Path, cluster, *extra: str) -> subprocess.Popen:
    config = root / "study.yaml"
    cmd = snakemake_cmd("--profile", str(slurm_profile(root, cluster)), "--configfile", str(config), *FAST, *extra)
    log = open(root / "snakemake.log", "ab")
    return subprocess.Popen(cmd, cwd=root, env=job_env(cluster.env), stdout=log, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, root: Path, timeout: float = 900) -> str:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    output = (root / "snakemake.log").read_text(errors="replace")
    assert proc.returncode == 0, output[-4000:]
    return output


# -- the outputs -------------------------------------------------------------------------------
# What a phase's log says about how this run got its samples, not what they are: time (how long, and
# when it began), and how many came from the cache (a resubmitted job finds its orphan's shards there).
RUN_HISTORY = {"seconds", "started_utc", "cached_requests", "calls", "generated_tokens"}


def _timeless(data: bytes, rel: str, hashes: dict[str, str]) -> bytes:
    """A file's bytes less what wall-clock time decides: every ``seconds`` field of a JSON file,
    and the hashes (``hashes``: ours -> theirs) of files that differ only in those."""
    if rel.endswith(".parquet") or rel.endswith(".png"):
        return data
    text = data.decode("utf-8")
    for ours, theirs in hashes.items():
        text = text.replace(ours, theirs)
    if not rel.endswith(".json"):
        return text.encode()

    def drop(value):
        if isinstance(value, dict):
            return {k: drop(v) for k, v in value.items() if k not in RUN_HISTORY}
        return [drop(v) for v in value] if isinstance(value, list) else value

    return json.dumps(drop(json.loads(text)), sort_keys=True).encode()


def outputs(study: Path) -> dict[str, Path]:
    return {
        p.relative_to(study).as_posix(): p
        for p in sorted(study.rglob("*"))
        if p.is_file() and not p.relative_to(study).as_posix().startswith("logs/")
    }


def assert_same_study(root: Path, local: Path) -> None:
    """Every output of the study at ``root`` equals the local run's, timing fields aside: files are
    matched in passes, each pass mapping the hashes of the files found equal so far, so that a
    manifest that hashes a generation.json is compared with that file's hash mapped."""
    ours, theirs = outputs(root / "results" / STUDY), outputs(local / "results" / STUDY)
    assert sorted(ours) == sorted(theirs)
    hashes: dict[str, str] = {}
    pending = sorted(theirs)
    while pending:
        equal = [
            r for r in pending if _timeless(ours[r].read_bytes(), r, hashes) == _timeless(theirs[r].read_bytes(), r, {})
        ]
        if not equal:
            break
        for rel in equal:
            hashes[hashlib.sha256(ours[rel].read_bytes()).hexdigest()] = hashlib.sha256(
                theirs[rel].read_bytes()
            ).hexdigest()
        pending = [r for r in pending if r not in equal]
    assert pending == [], f"differ from the local run beyond timing: {pending}"


def assert_audit_passes(root: Path) -> None:
    audited = subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", "audit", str(root / "results" / STUDY)],
        cwd=root, env=job_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert audited.returncode == 0, audited.stdout[-3000:] + audited.stderr[-3000:]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from slurm_cluster import SlurmCluster, install

    if os.environ.get("COTDYN_SLURM_TESTS") == "0":
        pytest.skip("COTDYN_SLURM_TESTS=0: the real-SLURM tests are switched off (docs/cluster.md)")
    reason = install()
    if reason:
        pytest.skip(f"no SLURM to test against: {reason}")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def local_study(tmp_path_factory) -> Path:
    """The same study run locally with --cores 2: what every SLURM run must equal."""
    root = tmp_path_factory.mktemp("local")
    config = write_study(root)
    start = time.monotonic()
    done = subprocess.run(
        snakemake_cmd("--cores", "2", "--configfile", str(config)),
        cwd=root, env=job_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    WALL_SECONDS["local"] = time.monotonic() - start
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return root


def wait_for(cluster, proc, predicate, what: str, timeout: float = 600) -> dict:
    """Poll the queue until ``predicate(job)`` holds for a job; that job."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job in cluster.jobs():
            if predicate(job):
                return job
        if proc.poll() is not None:
            pytest.fail(f"snakemake ended ({proc.returncode}) before {what}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def accounted(cluster, job_ids: set[str], timeout: float = 600) -> dict[str, str]:
    """The accounting states once slurmdbd has recorded every job of ``job_ids`` as ended (it
    records them after the controller, by as long as a busy machine makes it)."""
    deadline = time.monotonic() + timeout
    while True:
        states = cluster.accounting_states()
        ended = {i for i in job_ids if states.get(i, "PENDING").split()[0] not in ("PENDING", "RUNNING", "REQUEUED")}
        if ended == job_ids or time.monotonic() > deadline:
            return states
        time.sleep(1)


def requeued(cluster, job_id: str) -> bool:
    """Whether slurmdbd has recorded a run of the job that ended REQUEUED."""
    return "REQUEUED" in cluster.accounting_history(job_id)


def running(rule: str):
    return lambda job: job["state"] == "RUNNING" and job["comment"].startswith(rule)


def in_state(job_id: str, *states: str):
    return lambda job: job["id"] == job_id and job["state"] in states


@pytest.mark.slow
def test_a_srun_inside_a_job_reads_the_test_clusters_configuration(cluster):
    """The jobstep plugin runs srun without SLURM_CONF; on a machine with its own
    /etc/slurm/slurm.conf that srun would ask the machine's controller. The jobs find the test
    cluster's srun first, and the step it starts is of this cluster."""
    found, step = cluster.job_step_conf()[:2]
    assert found == str(cluster.bin / "srun"), (found, step)
    assert step.startswith(str(cluster.folder)), step


@pytest.mark.slow
def test_a_study_survives_a_failed_job_a_cancel_a_preemption_and_its_controller_killed(
    cluster, local_study, tmp_path, capsys
):
    """One study through every accident in turn: the reference job killed (it fails, and is
    retried, asking for 1.5x the memory), scancel of its retry (retried again, with 2x), the
    continuations job requeued while it runs, as a preemption does (it runs again under its id),
    and then, while that job runs again, kill -9 of snakemake. The job runs on, orphaned; after
    ``--unlock`` a new controller resubmits it, and of the two jobs of the cell the first to finish
    places the samples, the other leaves them as they are (first writer wins). The study equals
    the local run and its audit passes.

    Through the shipped profile the study is jobs of three rules only: reference, continuations and
    one grouped job for the analysis (group-components merges each cell's grading, which no other
    analysis rule reads, into it); the plan check, the problems, the manifests, the audit and the
    report pages run on the login node (localrules). The run reports its submissions and wall time
    beside the local run's (docs/cluster.md records them)."""
    write_study(tmp_path)
    before = set(cluster.accounting_states())
    start = time.monotonic()
    # Every accident acts on a job held RUNNING (cluster.pause): on states, never on how long a job
    # takes, so a slow or a fast machine runs the same story.
    cluster.pause("rule_reference")
    cluster.pause("rule_continuations")
    proc = slurm_run(tmp_path, cluster)
    failed = wait_for(cluster, proc, running("rule_reference"), "the reference job running")
    cluster.run("scancel", "--batch", "--signal=KILL", failed["id"])
    retry = lambda job: running("rule_reference")(job) and job["id"] != failed["id"]  # noqa: E731
    cancelled = wait_for(cluster, proc, retry, "the reference job running again")
    cluster.run("scancel", cancelled["id"])
    third = lambda job: retry(job) and job["id"] != cancelled["id"]  # noqa: E731
    wait_for(cluster, proc, third, "the reference job's second retry running")
    cluster.resume("rule_reference")
    preempted = wait_for(cluster, proc, running("rule_continuations"), "the continuations job running")
    cluster.run("scontrol", "requeue", preempted["id"])
    orphan = wait_for(
        cluster, proc, lambda job: in_state(preempted["id"], "RUNNING")(job) and requeued(cluster, job["id"]),
        "the requeued job running again",
    )  # fmt: skip
    proc.kill()
    proc.wait()
    first_run = (tmp_path / "snakemake.log").read_text(errors="replace")
    assert first_run.count("Error in rule reference") == 2, first_run[-3000:]
    # the three reference jobs asked for 8000, 12000 and 16000 MB (memory scaled by the attempt)
    requests = cluster.accounting_requests()
    asked = [
        requests[i]["mem"] for i in sorted(requests, key=int) if requests[i]["comment"].startswith("rule_reference")
    ]
    assert asked[-3:] == ["8000M", "12000M", "16000M"], asked
    unlocked = subprocess.run(
        snakemake_cmd("--unlock", "--configfile", str(tmp_path / "study.yaml")),
        cwd=tmp_path, env=job_env(cluster.env), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert unlocked.returncode == 0, unlocked.stdout + unlocked.stderr
    assert orphan["id"] in {j["id"] for j in cluster.jobs() if j["state"] == "RUNNING"}
    cluster.resume("rule_continuations")  # the orphan goes on, beside the new controller's own job
    finish(slurm_run(tmp_path, cluster), tmp_path)
    states = accounted(cluster, {cancelled["id"], failed["id"]})
    assert states[cancelled["id"]].startswith("CANCELLED"), states
    assert states[failed["id"]] in {"FAILED", "CANCELLED"}, states
    cell = tmp_path / "results" / STUDY / "cells" / "sim-gsm8k" / "registered"
    accepted = {
        f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in (cell / "samples.parquet", cell / "generation.json")
    }
    deadline = time.monotonic() + 600
    while cluster.accounting_states().get(orphan["id"]) in ("RUNNING", "PENDING", "COMPLETING"):
        assert time.monotonic() < deadline, "the orphaned job did not end"
        time.sleep(1)
    # however the two jobs of the cell interleaved, nothing rewrote the outputs the new run accepted
    assert {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in accepted} == accepted
    seconds = time.monotonic() - start
    requests = cluster.accounting_requests()
    rules = sorted(requests[i]["comment"].split("_wildcards")[0] for i in set(requests) - before)
    with capsys.disabled():  # on stderr: a pytest-xdist worker's stdout does not reach the terminal
        print(f"\nSLURM run: {len(rules)} submissions ({', '.join(rules)}), {seconds:.0f} s through every accident;"
              f" local --cores 2: {WALL_SECONDS['local']:.0f} s", file=sys.stderr)  # fmt: skip
    submitted = {rule: sum(r.startswith(rule) for r in rules) for rule in ("rule_reference", "rule_continuations")}
    # three reference jobs (two ended by the test); the requeued job keeps its id, its resubmission
    # by the second controller is one more unless the orphan finished first
    story = [line for line in (tmp_path / "snakemake.log").read_text(errors="replace").splitlines()
             if re.search(r"Error in rule|external jobid|^rule |Reason:", line)]  # fmt: skip
    assert submitted["rule_reference"] == 3 and submitted["rule_continuations"] in (1, 2), (rules, story)
    assert sum(r.startswith("rule_analysis") for r in rules) == 1, rules
    # the grouped analysis asked for what the node has, not the profile's 8 cores
    from slurm_cluster import NODE_CPUS

    group_cpus = [
        requests[i]["cpus"] for i in set(requests) - before if requests[i]["comment"].startswith("rule_analysis")
    ]
    assert group_cpus and max(group_cpus) <= NODE_CPUS, (group_cpus, NODE_CPUS)
    assert len(rules) == sum(submitted.values()) + 1, rules  # nothing else was submitted
    assert_same_study(tmp_path, local_study)
    assert_audit_passes(tmp_path)


@pytest.mark.slow
def test_a_request_no_node_meets_is_refused_before_submission(cluster, tmp_path):
    config = write_study(tmp_path, resources={"mem_mb": 64000})
    before = {j["id"] for j in cluster.jobs()}
    done = subprocess.run(
        snakemake_cmd("--profile", str(slurm_profile(tmp_path, cluster)), "--configfile", str(config)),
        cwd=tmp_path, env=job_env(cluster.env), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "requests no node can meet" in output and "rule reference: asks for 2 CPUs, 64000 MB" in output, output
    assert "no node of the cluster has that" in output  # the plugin picks the partition
    assert {j["id"] for j in cluster.jobs()} == before  # nothing was submitted
    # a grouped job is checked too: each analysis job asking for more memory than the node has
    config = write_study(tmp_path)
    profile = slurm_profile(tmp_path, cluster)
    settings = yaml.safe_load((profile / "config.yaml").read_text())
    settings["default-resources"]["mem_mb"] = 20000
    (profile / "config.yaml").write_text(yaml.safe_dump(settings))
    done = subprocess.run(
        snakemake_cmd("--profile", str(profile), "--configfile", str(config)),
        cwd=tmp_path, env=job_env(cluster.env), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "requests no node can meet" in output, output[-3000:]
    assert re.search(r"group analysis: asks for \d+ CPUs, \d+ MB; no node", output), output[-3000:]
    assert {j["id"] for j in cluster.jobs()} == before


# -- without the cluster -----------------------------------------------------------------------
SINFO = "cpu*|4|16000|(null)\ngpu|32|512000|gpu:h100:4(S:0-1)\ngpu|16|256000|gpu:2,shard:8\n"


def test_requests_are_checked_against_the_nodes_of_their_partition():
    nodes = parse_sinfo(SINFO)
    assert nodes[0] == Node("cpu", 4, 16000, {}) and nodes[1].gpus == {"h100": 4} and nodes[2].gpus == {"": 2}
    assert unmet({"cpus": 2, "mem_mb": 8000, "gpu": 0}, "cpu", nodes) is None
    assert "asks for 2 CPUs, 64000 MB; no node of partition 'cpu'" in unmet({"cpus": 2, "mem_mb": 64000}, "cpu", nodes)
    assert unmet({"cpus": 8, "mem_mb": 64000, "gpu": 1, "gpu_model": "h100"}, "gpu", nodes) is None
    assert unmet({"cpus": 8, "mem_mb": 64000, "gpu": 1, "gpu_model": "a100"}, "gpu", nodes) is not None
    assert unmet({"cpus": 8, "mem_mb": 64000, "gpu": 1}, "cpu", nodes) is not None  # no GPU there
    assert unmet({"cpus": 8, "mem_mb": 64000, "gpu": 2}, None, nodes) is None  # any partition
    assert "has no nodes" in unmet({"cpus": 1}, "big", nodes)


def test_a_grouped_job_is_held_to_the_largest_node_it_can_go_to():
    nodes = parse_sinfo(SINFO)
    assert group_width(nodes, None, cores=8) == 4  # the CPU node, not the GPU nodes' 32
    assert group_width(nodes, "gpu", cores=8) == 8 and group_width(nodes, "gpu", cores=64) == 32
    assert group_width(nodes, None, cores=2) == 2  # the profile's cores when smaller
    assert group_width([Node("gpu", 16, 1000, {"": 1})], None, cores=8) == 8  # only GPU nodes: any


def _requests(dry_run: str, rule: str) -> str:
    block = dry_run.split(f"rule {rule}:", 1)[1]
    return re.search(r"resources: (.*)", block).group(1)


@pytest.mark.slow
def test_a_gpu_is_asked_for_only_where_the_model_runs_on_cuda(tmp_path):
    """The rules decide: the simulated (CPU) cell's generation jobs ask for no GPU, a CUDA cell's
    for one of its entry's gpu_model, with the entry's CPUs and memory or the CUDA defaults."""
    cpu = write_study(tmp_path / "cpu")
    cuda = yaml.safe_load((ROOT / "config" / "gpu-dummy.yaml").read_text())
    cuda["models"]["dummy7b"]["resources"] = {"gpu_model": "h100", "partition": "gpu", "runtime": {"reference": 30}}
    (tmp_path / "cuda.yaml").write_text(yaml.safe_dump(cuda))
    profile = tmp_path / "profile"
    profile.mkdir()
    for name in ("config.yaml", "partitions.yaml"):
        (profile / name).write_text((ROOT / "profiles" / "slurm" / name).read_text())
    runs = {}
    for name, config in (("cpu", cpu), ("cuda", tmp_path / "cuda.yaml")):
        # a dry run plans with the profile's resources without submitting (no cluster needed)
        done = subprocess.run(
            snakemake_cmd("-n", "--profile", str(profile), "--configfile", str(config)),
            cwd=ROOT if name == "cuda" else tmp_path / "cpu", env=job_env(), capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        runs[name] = done.stdout + done.stderr
    for rule in ("reference", "continuations"):
        cpu_asks, cuda_asks = _requests(runs["cpu"], rule), _requests(runs["cuda"], rule)
        assert "gpu=0" in cpu_asks and "gpu_model" not in cpu_asks and "cpus_per_task=2" in cpu_asks, cpu_asks
        assert "slurm_partition" not in cpu_asks and "mem_mb=8000" in cpu_asks  # the plugin picks it
        assert "gpu=1" in cuda_asks and "gpu_model=h100" in cuda_asks and "slurm_partition=gpu" in cuda_asks
        assert "cpus_per_task=8" in cuda_asks and "mem_mb=64000" in cuda_asks
    assert "runtime=30" in _requests(runs["cuda"], "reference")
    assert "runtime=360" in _requests(runs["cuda"], "continuations")
    assert "gpu=" not in _requests(runs["cpu"], "records")


def planned_jobs(dry_run: str) -> list[tuple[str, SimpleNamespace]]:
    """Every job a dry run prints, as (rule, a job as the SLURM plugin's partition selection reads
    it: name, threads, resources)."""
    jobs = []
    for block in re.split(r"\n(?=\s*(?:local)?rule \w+:)", dry_run)[1:]:
        rule = re.match(r"\s*(?:local)?rule (\w+):", block).group(1)
        asks = re.search(r"resources: (.*)", block)
        threads = re.search(r"threads: (\d+)", block)
        resources = dict(item.split("=", 1) for item in asks.group(1).split(", ")) if asks else {}
        resources = {k: int(v) if v.isdigit() else v for k, v in resources.items()}
        job = SimpleNamespace(name=rule, threads=int(threads.group(1)) if threads else 1, resources=resources)
        jobs.append((rule, job))
    return jobs


@pytest.mark.slow
def test_the_panels_generation_jobs_go_to_the_gpu_partition(tmp_path):
    """The panel's dry run through profiles/slurm as shipped: the plugin's own partition selection
    (the code its submission runs for a job without slurm_partition) applied to every planned job's
    resources puts every reference and continuations job on the GPU partition and every other
    submitted job on the CPU partition."""
    from snakemake_executor_plugin_slurm.partitions import get_best_partition, read_partition_file

    done = subprocess.run(
        snakemake_cmd("-n", "--profile", str(ROOT / "profiles" / "slurm"), "--configfile", "config/panel.yaml"),
        cwd=ROOT, env=job_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    partitions = read_partition_file(ROOT / "profiles" / "slurm" / "partitions.yaml")
    logger = logging.getLogger("slurm-partitions")
    chosen: dict[str, set[str]] = {}
    for rule, job in planned_jobs(done.stdout + done.stderr):
        assert "slurm_partition" not in job.resources, (rule, job.resources)
        chosen.setdefault(rule, set()).add(get_best_partition(partitions, job, logger))
    assert chosen["reference"] == chosen["continuations"] == {"CHANGE_ME_gpu"}, chosen
    generation = sum(rule in ("reference", "continuations") for rule, _ in planned_jobs(done.stdout))
    assert generation == 16, generation  # 8 cells, 2 phases
    for rule in set(chosen) - {"reference", "continuations", "all"}:
        assert chosen[rule] == {"CHANGE_ME_cpu"}, (rule, chosen[rule])
