"""Kill-and-resume (docs/reference.md section 3): a study SIGKILLed at random points and run again ends with
byte-identical samples and records, and no sample lost or duplicated; a torn or altered cache
shard is detected and regenerated, never trusted.

Each run is a separate process calling ``cotdyn.generation.run`` the way the Snakemake rules do (reference,
continuations, records; the rerun starts from the top, as a requeued job does). A trial waits until
the cache holds a randomly drawn number of shards, then kills the process after a random further
delay, so kills land before, between and during shard writes, in both phases.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from killing import log_to

from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.plan.load import effective_protocol

# Every test here runs a study in processes of its own (seconds each): the slow tier.
pytestmark = pytest.mark.slow

ARTIFACTS = ("chains.parquet", "samples.parquet", "records.parquet")
# Children come from a fork server that has imported the library once: a run costs its work,
# not a fresh interpreter's imports, and nothing from the test process's threads is inherited.
_SERVER = multiprocessing.get_context("forkserver")
_SERVER.set_forkserver_preload(
    ["cotdyn.generation.run", "cotdyn.generation.backends.simulated", "cotdyn.generation.backends.transformers"]
)


def study(args: dict) -> None:
    """One job as the Snakemake rules run it: reference, continuations, records."""
    from cotdyn.generation.run import run_continuations, run_reference
    from cotdyn.records.derive import derive_records

    if args["model"]["backend"] == "transformers":
        import torch

        # One intra-op thread: on a shared 2-core machine two spinning OpenMP threads run ~20x slower.
        torch.set_num_threads(1)
    out = Path(args["out"])
    log_to(out)
    run_reference(
        args["problems"],
        args["model"],
        args["protocol"],
        args["cell"],
        args["benchmark"],
        args["cache"],
        out / "chains.parquet",
        out / "reference.json",
    )
    run_continuations(
        args["problems"],
        out / "chains.parquet",
        args["model"],
        args["protocol"],
        args["cell"],
        args["benchmark"],
        args["cache"],
        out / "samples.parquet",
        out / "continuations.json",
    )
    derive_records(
        out / "chains.parquet",
        out / "samples.parquet",
        args["protocol"],
        args["exclusion"],
        args["benchmark"],
        args["cell"],
        out / "records.parquet",
        out / "summary.json",
    )


def _args(base: dict, directory: Path) -> dict:
    return {**base, "out": str(directory / "out"), "cache": str(directory / "cache")}


def _start(args: dict):
    process = _SERVER.Process(target=study, args=(args,))
    process.start()
    return process


def _run(args: dict) -> None:
    process = _start(args)
    process.join(timeout=120)
    log = Path(args["out"]) / "run.log"
    assert process.exitcode == 0, log.read_text()[-2000:] if log.exists() else process.exitcode


def _shards(args: dict) -> int:
    cache = Path(args["cache"])
    return len(list(cache.glob("*/*.json"))) if cache.exists() else 0  # one folder per model revision


def _kill_at(args: dict, shards: int, delay: float) -> tuple[int | None, int]:
    """Run until the cache holds ``shards`` shards, wait ``delay`` s, SIGKILL; the exit code and
    the shards left."""
    process = _start(args)
    while process.is_alive() and _shards(args) < shards:
        time.sleep(0.002)
    time.sleep(delay)
    if process.is_alive():
        os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=120)
    return process.exitcode, _shards(args)


def _log(args: dict, phase: str) -> dict:
    return json.loads((Path(args["out"]) / f"{phase}.json").read_text())


def _assert_same_as(args: dict, baseline: dict) -> None:
    for name in ARTIFACTS:
        assert (Path(args["out"]) / name).read_bytes() == (Path(baseline["out"]) / name).read_bytes(), name


def _assert_one_row_per_sample(args: dict, m: int) -> None:
    samples = pd.read_parquet(Path(args["out"]) / "samples.parquet")
    keys = samples[["problem_id", "prefix", "sample"]]
    assert not keys.duplicated().any()
    per_prefix = samples.groupby(["problem_id", "prefix"]).size()
    assert (per_prefix == m).all()  # none lost
    chains = pd.read_parquet(Path(args["out"]) / "chains.parquet")
    assert set(samples["problem_id"]) <= set(chains["problem_id"])
    assert len(pd.read_parquet(Path(args["out"]) / "records.parquet")) == len(chains)


@pytest.fixture(scope="module")
def protocol(plan) -> dict:
    return effective_protocol(plan)


@pytest.fixture(scope="module")
def simulated(data_dir, plan, protocol, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("resume_simulated")
    problems = load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 150})
    problems_table(problems).to_parquet(root / "problems.parquet", index=False)
    base = {
        "problems": str(root / "problems.parquet"),
        "model": {"backend": "simulated", "chunk_size": 25},
        "protocol": protocol,
        "exclusion": plan["exclusion"],
        "cell": "qwen7b-gsm8k",
        "benchmark": "gsm8k",
    }
    baseline = _args(base, root / "baseline")
    _run(baseline)
    return {"root": root, "base": base, "baseline": baseline, "shards": _shards(baseline)}


def test_killed_runs_resume_to_byte_identical_outputs(simulated, protocol):
    rng = random.Random(20260829)
    total = simulated["shards"]
    assert total > 40  # many shards: kills land in both phases
    left = []
    for trial in range(5):
        args = _args(simulated["base"], simulated["root"] / f"trial{trial}")
        # A simulated shard takes milliseconds: stop short of the last ones so the kill lands mid-run.
        exitcode, shards = _kill_at(args, rng.randrange(1, total - 15), rng.uniform(0.0, 0.01))
        assert exitcode == -signal.SIGKILL
        left.append(shards)
        _run(args)
        _assert_same_as(args, simulated["baseline"])
        _assert_one_row_per_sample(args, protocol["m"])
        logs = [_log(args, "reference"), _log(args, "continuations")]
        assert sum(log["cached_requests"] for log in logs) > 0  # the rerun resumed from the cache
        assert not list(Path(args["cache"]).glob("*/*.tmp"))  # a temporary the kill left is cleaned
    assert all(0 < n < total for n in left), left  # every trial was interrupted mid-study
    _assert_one_row_per_sample(simulated["baseline"], protocol["m"])


def test_a_torn_or_altered_shard_is_redone_not_trusted(simulated):
    import shutil

    args = _args(simulated["base"], simulated["root"] / "damaged")
    shutil.copytree(simulated["baseline"]["cache"], args["cache"])
    shards = sorted(Path(args["cache"]).glob("*/*.json"))
    torn, altered = shards[3], shards[-3]
    torn.write_bytes(torn.read_bytes()[: torn.stat().st_size // 2])  # a write cut short
    payload = json.loads(altered.read_text())
    payload["body"] = payload["body"].replace("final answer is", "final answer is 1", 1)  # valid JSON, wrong body
    altered.write_text(json.dumps(payload))

    from cotdyn.generation.cache import GenerationCache

    rejected = GenerationCache(shards[0].parent).rejected
    assert sorted(r.split(":")[0] for r in rejected) == sorted([torn.name, altered.name])
    assert "checksum mismatch" in " ".join(rejected)
    _run(args)
    _assert_same_as(args, simulated["baseline"])
    logs = [_log(args, "reference"), _log(args, "continuations")]
    requests = sum(log["requests"] for log in logs)
    assert 0 < sum(log["cached_requests"] for log in logs) < requests  # only the damaged shards' share redone
    assert {p.name for p in Path(args["cache"]).glob("*/*.json")} == {p.name for p in shards}  # rewritten whole


def test_transformers_backend_resumes_byte_identically(tiny_model_dir, data_dir, plan, tmp_path):
    problems = load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 2})
    problems_table(problems).to_parquet(tmp_path / "problems.parquet", index=False)
    # Short budgets keep the random tiny model quick; resumption does not depend on them.
    protocol = effective_protocol(plan, {"reference_max_tokens": 24, "continuation_max_tokens": 8, "dtype": "float32"})
    model = {
        "backend": "transformers",
        "id": str(tiny_model_dir),
        "dtype": "float32",
        "device": "cpu",
        "transformers": {"batch_size": 4},
        "chunk_size": 1,
    }
    base = {
        "problems": str(tmp_path / "problems.parquet"),
        "model": model,
        "protocol": protocol,
        "exclusion": plan["exclusion"],
        "cell": "tiny-gsm8k",
        "benchmark": "gsm8k",
    }
    baseline = _args(base, tmp_path / "baseline")
    _run(baseline)
    total = _shards(baseline)
    assert total >= 4
    rng = random.Random(7)
    for trial in range(2):
        args = _args(base, tmp_path / f"trial{trial}")
        exitcode, left = _kill_at(args, rng.randrange(1, total), rng.uniform(0.0, 0.05))
        assert exitcode == -signal.SIGKILL and 0 < left < total
        _run(args)
        _assert_same_as(args, baseline)
        _assert_one_row_per_sample(args, protocol["m"])
