"""Generation a kill loses (issue 53): the README's main job's reference phase (config/config.yaml: the
embedded SmolLM2-135M on data/additions.jsonl, its plan's budgets), run once uninterrupted, then
killed (``kill -9``) at uniformly drawn moments of its generation and resumed, each time.

    python benchmarks/bench_kill_loss.py [--kills 5] [--limit 40] [--seed 0]

A kill's loss is the killed run's generation time plus the resumed run's, less the uninterrupted
run's (model loading excluded). Each resumed run's chains are compared with the uninterrupted run's,
byte for byte. It converts the GGUF once into a temporary folder (about a minute).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


class Stamp:
    """An observer writing when generation starts (after the model is loaded)."""

    def __init__(self, path: Path):
        self.path = path

    def before(self, job) -> None:
        self.path.write_text(repr(time.time()))

    def first_chunk(self, job, rows, pending_rows, seconds) -> None:
        pass

    def after(self, job, stats) -> None:
        pass


def phase(args: dict) -> None:
    import torch

    from cotdyn.generation.run import run_reference

    torch.set_num_threads(args["threads"])
    out = Path(args["out"])
    out.mkdir(parents=True, exist_ok=True)
    log = os.open(out / "run.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    run_reference(
        args["problems"], args["model"], args["protocol"], "smollm2-additions", "number", args["cache"],
        out / "chains.parquet", out / "reference.json", observer=Stamp(out / "started"),
    )  # fmt: skip


def start(args: dict):
    process = multiprocessing.get_context("spawn").Process(target=phase, args=(args,))
    process.start()
    return process


def generation_seconds(out: Path) -> float:
    return json.loads((out / "reference.json").read_text())["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--limit", type=int, default=40, help="problems (the job has 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    options = parser.parse_args()

    from cotdyn.dataset.benchmarks import load_benchmark, problems_table
    from cotdyn.generation.backends.transformers.weights import convert_gguf
    from cotdyn.plan.load import effective_protocol, load_plan

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    entry = config["models"]["smollm2"]
    bench = {**config["benchmarks"]["additions"], "path": str(ROOT / "data" / "additions.jsonl")}
    root = Path(tempfile.mkdtemp(prefix="kill_loss."))
    model_dir = convert_gguf(entry["gguf"]["package"], entry["gguf"]["file"], root / "model")
    model = {k: v for k, v in entry.items() if k != "gguf"} | {"id": str(model_dir), "dtype": "float32"}
    protocol = effective_protocol(load_plan(ROOT / config["plan"]), {"dtype": "float32"})
    problems = root / "problems.parquet"
    problems_table(load_benchmark({**bench, "limit": options.limit})).to_parquet(problems, index=False)
    base = {"problems": str(problems), "model": model, "protocol": protocol, "threads": options.threads}

    baseline = {**base, "out": str(root / "baseline"), "cache": str(root / "baseline-cache")}
    process = start(baseline)
    process.join()
    assert process.exitcode == 0, (Path(baseline["out"]) / "run.log").read_text()[-2000:]
    whole = generation_seconds(Path(baseline["out"]))
    print(f"{options.limit} reference chains, uninterrupted: {whole:.1f} s of generation (root {root})")
    rng = random.Random(options.seed)
    for trial in range(options.kills):
        args = {**base, "out": str(root / f"trial{trial}"), "cache": str(root / f"trial{trial}-cache")}
        at = rng.uniform(0.05, 0.95) * whole
        process = start(args)
        started = Path(args["out"]) / "started"
        while process.is_alive() and not started.exists():
            time.sleep(0.05)
        began = float(started.read_text())
        time.sleep(max(0.0, began + at - time.time()))
        os.kill(process.pid, signal.SIGKILL)
        killed = time.time() - began
        process.join()
        journaled = sum(p.read_bytes().count(b"\n") for p in Path(args["cache"]).glob("*/*.journal"))
        process = start(args)
        process.join()
        assert process.exitcode == 0, (Path(args["out"]) / "run.log").read_text()[-2000:]
        resumed = generation_seconds(Path(args["out"]))
        same = (Path(args["out"]) / "chains.parquet").read_bytes() == (
            Path(baseline["out"]) / "chains.parquet"
        ).read_bytes()
        print(
            f"kill {trial + 1}: at {killed:.1f} s, {journaled} of {options.limit} chains journaled; resumed in "
            f"{resumed:.1f} s; lost {killed + resumed - whole:+.1f} s; chains byte-identical: {same}"
        )


if __name__ == "__main__":
    main()
