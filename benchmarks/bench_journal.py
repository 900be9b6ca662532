"""What journaling each finished sample costs (issue 53, cotdyn.generation.journal), against the chunk
written at once as before, measured in the same run on the same requests.

    python benchmarks/bench_journal.py [--requests 2000] [--repeats 5]

The simulated backend answers a sample in tens of microseconds, so it shows the journal's cost at
its most visible; a real backend spends milliseconds (vLLM, a server) to seconds (transformers on a
CPU) per sample, beside which the per-line cost printed here is what a sample pays.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from cotdyn.generation import journal as J
from cotdyn.generation.backends import Completion, Request, Sampling
from cotdyn.generation.backends.simulated import SimulatedBackend
from cotdyn.generation.cache import GenerationCache, generate


class ChunkAtOnce:
    """The backend told of no finished sample (``on_done`` dropped), so nothing is journaled."""

    def __init__(self, backend):
        self.backend = backend

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate(self, requests, desc="", done=None, on_done=None):
        return self.backend.generate(requests, desc=desc)


def workload(count: int) -> tuple[SimulatedBackend, list[Request]]:
    golds = {f"Problem {i}: what is {i} plus 1?": str(i + 1) for i in range(count)}
    backend = SimulatedBackend(golds, "gsm8k")
    prompts = [tuple(backend.tokenizer.chat_prompt_ids("Solve step by step.", q)) for q in golds]
    # a reference chain (n = 1) and an empty prefix's continuations (n = 5) per problem
    requests = [Request(p, 1, Sampling(0.7, 600), i << 10, "reference") for i, p in enumerate(prompts)]
    requests += [Request(p, 5, Sampling(0.7, 150), (i << 10) + 512) for i, p in enumerate(prompts)]
    return backend, requests


def timed(backend, requests) -> float:
    with tempfile.TemporaryDirectory() as folder:
        cache = GenerationCache(Path(folder))
        started = time.perf_counter()
        generate(backend, requests, cache, chunk_size=0)
        return time.perf_counter() - started


def line_cost(samples: int = 20000) -> float:
    """Microseconds to journal one sample of a 300-token chain, alone in its write."""
    row = [("0" * 64, 0, Completion(tuple(range(300)), "x" * 1200, "stop"))]
    with tempfile.TemporaryDirectory() as folder:
        journal = J.Journal(Path(folder))
        started = time.perf_counter()
        for _ in range(samples):
            journal.append(row)
        seconds = time.perf_counter() - started
        journal.remove()
    return 1e6 * seconds / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="problems (each a chain and 5 continuations)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    backend, requests = workload(args.requests)
    samples = sum(r.n for r in requests)
    times: dict[str, list[float]] = {"chunk at once": [], "journaled": []}
    for _ in range(args.repeats):  # interleaved, so a change in the machine's load hits both
        times["chunk at once"].append(timed(ChunkAtOnce(backend), requests))
        times["journaled"].append(timed(backend, requests))
    print(f"simulated backend, {len(requests)} requests, {samples} samples in one chunk, {args.repeats} repeats")
    for name, values in times.items():
        print(
            f"  {name:14s} median {statistics.median(values):7.3f} s  ({1e6 * statistics.median(values) / samples:6.1f} us a sample)"
        )
    base, journaled = (statistics.median(v) for v in times.values())
    print(
        f"  overhead       {100 * (journaled / base - 1):+6.1f} %  ({1e6 * (journaled - base) / samples:+.1f} us a sample)"
    )
    print(f"journal line of a 300-token sample, written alone: {line_cost():.1f} us")


if __name__ == "__main__":
    main()
