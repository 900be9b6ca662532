"""The time estimate against the time each phase took (cotdyn.generation.estimate; issue 61 item 4).

    python benchmarks/bench_estimate.py [--only default|simulated] [--limit N] [--threads 2]

Two studies' generation phases, each run through ``cotdyn.generation.run`` into a fresh cache:

- the embedded default (config/config.yaml: SmolLM2-135M on the transformers backend, the 40
  additions, its plan's budgets; the GGUF converted once into a temporary folder, not timed);
- the simulated panel's shape (config/simulated.yaml's model on all of GSM8K and MATH-500).

``--limit N`` takes the first N problems of each benchmark (a quicker, smaller run).

For each phase it prints the seconds its generation took (generation.json), the estimate before
it (its exact token bound at the backend's declared rate, ``estimate.RATES``: an upper bound) and
the estimate after its first chunk (that chunk's seconds plus the rest at its rate; none where the
phase is one chunk), each with its error against the actual time, and the tokens a second the phase
drew (what ``RATES`` declares).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


class Watch:
    """An observer keeping each phase's estimate after its first chunk: that chunk's time and the rest's."""

    def __init__(self):
        self.forecast = {}

    def before(self, job) -> None:
        pass

    def first_chunk(self, job, rows, pending_rows, seconds) -> None:
        from cotdyn.generation.estimate import first_chunk_text

        if rows < pending_rows:
            self.forecast[job.phase] = seconds + first_chunk_text(seconds, rows, pending_rows)[0]

    def after(self, job, stats) -> None:
        pass


def run_study(name: str, model: dict, benchmarks: dict[str, dict], protocol: dict, root: Path) -> None:
    from cotdyn.dataset.benchmarks import load_benchmark, problems_table
    from cotdyn.generation.run import run_continuations, run_reference

    for key, entry in benchmarks.items():
        out = root / name / key
        out.mkdir(parents=True)
        problems = out / "problems.parquet"
        problems_table(load_benchmark(entry)).to_parquet(problems, index=False)
        watch = Watch()
        cell, rule = f"{name}-{key}", entry.get("answer", entry["kind"])
        run_reference(problems, model, protocol, cell, rule, out / "cache", out / "chains.parquet",
                      out / "reference.json", observer=watch)  # fmt: skip
        run_continuations(problems, out / "chains.parquet", model, protocol, cell, rule, out / "cache",
                          out / "samples.parquet", out / "continuations.json", observer=watch)  # fmt: skip
        for phase, log in (("reference", "reference.json"), ("continuations", "continuations.json")):
            report(cell, phase, json.loads((out / log).read_text()), model, protocol, watch.forecast.get(phase))


def report(cell: str, phase: str, log: dict, model: dict, protocol: dict, forecast: float | None) -> None:
    from cotdyn.generation.estimate import declared_rate

    actual, tokens = log["seconds"], log["generated_tokens"]
    budget = protocol["reference_max_tokens" if phase == "reference" else "continuation_max_tokens"]
    bound = log["samples"] * budget  # every pending row at its budget: the phase's exact bound (a fresh cache)
    rate = declared_rate(model)
    before = bound / rate if rate else None

    def error(estimate: float | None) -> str:
        return "none" if estimate is None else f"{estimate:.1f} s ({(estimate - actual) / actual:+.0%})"

    print(f"{cell} {phase}: {log['samples']:,} rows, {tokens:,} tokens drawn of at most {bound:,}, in "
          f"{actual:.1f} s ({tokens / actual:,.0f} tokens/s); before it (bound at the declared rate): "
          f"{error(before)}; after its first chunk: {error(forecast)}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("default", "simulated"))
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--limit", type=int, default=None, help="the first N problems of each benchmark")
    options = parser.parse_args()
    import torch

    from cotdyn.generation.backends.transformers.weights import convert_gguf
    from cotdyn.plan.load import effective_protocol, load_plan

    torch.set_num_threads(options.threads)
    root = Path(tempfile.mkdtemp(prefix="bench_estimate."))
    print(f"load average {os.getloadavg()[0]:.1f}; scratch {root}", flush=True)
    if options.only in (None, "default"):
        config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
        entry = config["models"]["smollm2"]
        model_dir = convert_gguf(entry["gguf"]["package"], entry["gguf"]["file"], root / "model")
        model = {k: v for k, v in entry.items() if k != "gguf"} | {"id": str(model_dir), "dtype": "float32"}
        protocol = effective_protocol(load_plan(ROOT / config["plan"]), {"dtype": "float32"})
        bench = {**config["benchmarks"]["additions"], "path": str(ROOT / "data" / "additions.jsonl")}
        bench |= {"limit": options.limit} if options.limit else {}
        run_study("smollm2", model, {"additions": bench}, protocol, root)
    if options.only in (None, "simulated"):
        config = yaml.safe_load((ROOT / "config" / "simulated.yaml").read_text())
        model = config["models"]["qwen7b"]
        protocol = effective_protocol(load_plan(ROOT / config["plan"]))
        limit = {"limit": options.limit} if options.limit else {}
        benchmarks = {
            b: {"kind": b, "path": str(ROOT / "data" / f"{b}_test.jsonl"), **limit} for b in ("gsm8k", "math500")
        }
        run_study("qwen7b", model, benchmarks, protocol, root)
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
