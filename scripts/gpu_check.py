"""What only a GPU can show about the transformers backend: CUDA, float32 and bfloat16.

    python scripts/gpu_check.py --out DIR [--tokenizer results/models/smollm2] [--problems 12]
    python scripts/gpu_check.py --out DIR --device cpu   # a dry run of the script itself

A randomly initialised Llama with SmolLM2's tokenizer stands in for a real model (no hub on the
device machine). For float32 and bfloat16 on CUDA it reports, and writes to
DIR/gpu_check_<study dtype>[_deterministic].json:

- ``reproducible``: the same requests twice give the same samples;
- ``alone_as_in_batch``: the share of samples a request draws alone that equal its draws in a batch;
- ``shared_as_full_prefill``: the share of samples equal with shared prefill on and off;
- ``sampler_chi2_p``: the seeded sampler on CUDA against the tempered distribution (chi-square p);
- ``study``: a small cell (arithmetic problems) through reference, continuations and records,
  twice from empty caches and once from the first run's cache, with the sha256 of each output,
  whether the run from the cache and the second fresh run equal the first byte for byte, and the
  share of continuation samples the two fresh runs have in common.

The claims the workflow makes, on which the script exits non-zero when one fails: the same
requests give the same samples; the sampler draws from the tempered distribution; a run from the
cache equals the run that filled it; and in float32 a fresh run equals another. The shares say
how far rounding (bfloat16 above all) lets a sample depend on its batch or its run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

# cuBLAS needs this set before CUDA starts for deterministic GEMMs (--deterministic)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np
import pandas as pd
import torch
from scipy.stats import chisquare

ROOT = Path(__file__).resolve().parents[1]


def build_model(out: Path, tokenizer_dir: Path) -> Path:
    from transformers import AutoTokenizer

    from cotdyn.generation.backends.transformers import random_llama

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    random_llama(tokenizer, width=256, layers=4, heads=4, max_positions=2048).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def share_equal(a, b) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    return sum(x == y for x, y in pairs) / len(pairs)


def backend_checks(model_dir: Path, dtype: str, device: str) -> dict:
    from cotdyn.generation.backends import Request, Sampling, make_backend

    spec = {"backend": "transformers", "id": str(model_dir), "dtype": dtype, "device": device}
    backend = make_backend({**spec, "transformers": {"batch_size": 16}})
    full = make_backend({**spec, "transformers": {"batch_size": 16, "share_prefill": False}})
    base = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 2+3?"))
    other = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 7*6?"))
    # nested prompts, as one chain's prefix requests are, plus another problem's prompt
    requests = [
        Request(base + tuple(range(100, 100 + 8 * k)), 5, Sampling(0.7, 32), 256 * (k + 1)) for k in range(6)
    ] + [Request(other, 5, Sampling(0.7, 32), 4096)]
    first, again = backend.generate(requests), backend.generate(requests)
    alone = [backend.generate([r])[0] for r in requests]
    return {
        "reproducible": first == again,
        "alone_as_in_batch": share_equal(first, alone),
        "shared_as_full_prefill": share_equal(first, full.generate(requests)),
    }


def sampler_check(device: str) -> dict:
    from cotdyn.generation.backends import Sampling
    from cotdyn.generation.backends.transformers import SeededSampler

    p = torch.tensor([0.1, 0.2, 0.3, 0.4])
    logits = torch.log(p).repeat(4000, 1).to(device)
    out = {}
    for temperature in (1.0, 0.5):
        draws = SeededSampler(range(4000), Sampling(temperature, 1), device).draw(logits).cpu().numpy()
        expected = (p.double() ** (1 / temperature)).numpy()
        out[f"t={temperature}"] = float(
            chisquare(np.bincount(draws, minlength=4), 4000 * expected / expected.sum()).pvalue
        )
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def study_check(model_dir: Path, n_problems: int, device: str, dtype: str, scratch: Path) -> dict:
    from cotdyn.dataset.benchmarks import arithmetic, problems_table
    from cotdyn.files.writers import write_parquet
    from cotdyn.generation.estimate import Forecast
    from cotdyn.generation.run import run_continuations, run_reference
    from cotdyn.plan.load import effective_protocol, load_plan
    from cotdyn.records.derive import derive_records

    plan = load_plan(ROOT / "preregistration" / "plan.yaml")
    protocol = effective_protocol(
        plan,
        {"reference_max_tokens": 96, "continuation_max_tokens": 32, "checkpoints": "tokens", "checkpoint_stride": 16},
    )
    model = {"backend": "transformers", "id": str(model_dir), "dtype": dtype, "device": device}
    model["transformers"] = {"batch_size": 64}
    problems = scratch / "problems.parquet"
    write_parquet(problems_table(arithmetic(n_problems, seed=7)), problems)

    def run(name: str, cache: Path) -> dict:
        out = scratch / name
        out.mkdir()
        observer = Forecast()
        run_reference(
            problems,
            model,
            protocol,
            "gpu",
            "arithmetic",
            cache,
            out / "chains.parquet",
            out / "reference.json",
            observer=observer,
        )
        run_continuations(
            problems,
            out / "chains.parquet",
            model,
            protocol,
            "gpu",
            "arithmetic",
            cache,
            out / "samples.parquet",
            out / "continuations.json",
            observer=observer,
        )
        derive_records(
            out / "chains.parquet",
            out / "samples.parquet",
            protocol,
            plan["exclusion"],
            "arithmetic",
            "gpu",
            out / "records.parquet",
            out / "summary.json",
        )
        generated = json.loads((out / "continuations.json").read_text())
        return {
            "sha256": {f: sha256(out / f) for f in ("chains.parquet", "samples.parquet", "records.parquet")},
            "continuation_requests": generated["requests"],
            "cached": generated["cached_requests"],
            "generated_tokens": generated["generated_tokens"],
            "seconds": generated["seconds"],
        }

    runs = {
        "fresh": run("fresh", scratch / "cache_a"),
        "fresh_again": run("fresh_again", scratch / "cache_b"),
        "from_cache": run("from_cache", scratch / "cache_a"),
    }
    runs["from_cache_identical"] = runs["from_cache"]["sha256"] == runs["fresh"]["sha256"]
    runs["fresh_runs_identical"] = runs["fresh_again"]["sha256"] == runs["fresh"]["sha256"]
    a, b = (pd.read_parquet(scratch / name / "samples.parquet") for name in ("fresh", "fresh_again"))
    runs["samples_equal_share"] = float((a["text"] == b["text"]).mean())
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokenizer", default=str(ROOT / "results" / "models" / "smollm2"))
    parser.add_argument("--problems", type=int, default=12)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--study-dtype", default="bfloat16")
    parser.add_argument(
        "--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True) for the whole check"
    )
    args = parser.parse_args()
    torch.use_deterministic_algorithms(args.deterministic, warn_only=True)  # warnings name the ops
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    import transformers

    report = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "deterministic": args.deterministic,
        "study_dtype": args.study_dtype,
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else args.device,
    }
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = build_model(Path(scratch) / "model", Path(args.tokenizer))
        for dtype in ("float32", "bfloat16"):
            report[dtype] = backend_checks(model_dir, dtype, args.device)
            print(dtype, report[dtype], flush=True)
        report["sampler_chi2_p"] = sampler_check(args.device)
        report["study"] = study_check(model_dir, args.problems, args.device, args.study_dtype, Path(scratch))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    name = f"gpu_check_{args.study_dtype}{'_deterministic' if args.deterministic else ''}.json"
    Path(args.out, name).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    study = report["study"]
    claims = [
        report["float32"]["reproducible"],
        report["bfloat16"]["reproducible"],
        min(report["sampler_chi2_p"].values()) > 1e-3,
        study["from_cache_identical"],
        study["fresh_runs_identical"] or args.study_dtype != "float32",
    ]
    return 0 if all(claims) else 1


if __name__ == "__main__":
    sys.exit(main())
