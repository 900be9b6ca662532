"""A short sweep of vLLM's engine settings on one gpu-dummy cell's continuation phase (issue 16).

    python scripts/gpu_sweep_vllm.py --out DIR                 # on a GPU, within --budget-s (540 s)
    python scripts/gpu_sweep_vllm.py --out DIR --dry-run       # the same path on CPU, stand-in vLLM

The cell (default config/gpu-dummy.yaml's first: 128 GSM8K problems, a Qwen2-7B-shaped model with
dummy weights) is prepared as ``gpu_check_vllm.py`` prepares it, with its helpers. Each setting
runs in its own process, so that each engine gives its GPU memory back when it ends and a setting
that overruns the budget can be stopped: the first builds the engine with the model entry as it is
(vLLM's own defaults: on an H200 max_num_seqs 1024, max_num_batched_tokens 16384, CUDA graphs up to
512 sequences), writes the reference chains and the continuation requests (once, to
DIR/requests.json; a later setting reads them), empties the prefix cache the chains filled
(``LLM.reset_prefix_cache``, in both releases), and times the continuation phase; every other
setting reads the requests, builds its engine and times the same phase, from the same cold cache.
(gpu_check_vllm.py times the phase after the chains on one engine, with the cache warm; the Snakemake
rules run the phases as separate jobs, so the sweep's cold start is theirs.) The default grid is
max_num_seqs {1024, 2048, 512} x max_num_batched_tokens {16384, 32768}, chunked prefill on, CUDA
graphs captured up to max_num_seqs (``--cudagraph-capture``: ``max_num_seqs``, or ``default`` for
vLLM's min(2 x max_num_seqs, 512)), in that order. 256 and 8192 are left out: vLLM's H200 defaults
are above them already, and the measured phase (1,145 requests x 5 samples) keeps far more
sequences waiting than 1024.

Written, row by row as each setting ends, to DIR/gpu_sweep_vllm.jsonl: the setting, its status
(ok, failed, timed out, not run: budget), the engine start, the phase's tokens, seconds,
``tokens_per_s``, ``model_tflops`` and ``utilisation`` of ``--peak-tflops`` (gpu_check_vllm's
``phase_figures`` and ``flops_per_generated_token``: one definition), and the engine settings in
effect as the backend records them (``describe()["engine_settings"]``). Then DIR/gpu_sweep_vllm.json
holds every row, the best setting by tokens/s, whether it reaches ``--target-utilisation`` (the
issue's 60%), and the model-entry ``vllm:`` block to paste; the block is also printed.

``--budget-s`` bounds the whole run (default 540 s, inside the GPU machine's 10-minute limit on one
command): a setting is not started when the time left is below the longest one so far, and one
still running at the budget's end is stopped (its process group) and recorded as timed out. On
the GPU machine, with the vLLM bundle unpacked as gpu_check_vllm.py's docstring says::

    PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 python scripts/gpu_sweep_vllm.py --out OUT

A setting costs about an engine start (about 30 s measured with vLLM's defaults; more CUDA graphs
take longer to capture), the continuation phase (about 30 s at the measured rate) and the
process's imports, so the default grid of 7 may not all fit; those cut are listed, and
``--max-num-seqs`` / ``--max-num-batched-tokens`` run them in a second command.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # gpu_check_vllm, whose helpers this shares

import gpu_check_vllm as check  # noqa: E402  (it puts this checkout's src on the path)
import yaml  # noqa: E402

from cotdyn.dataset.benchmarks import load_benchmark, problems_table  # noqa: E402
from cotdyn.files import layout as L  # noqa: E402
from cotdyn.files.writers import write_json, write_parquet  # noqa: E402
from cotdyn.generation.backends import Request, Sampling, make_backend  # noqa: E402
from cotdyn.generation.cache import generate  # noqa: E402
from cotdyn.generation.estimate import Forecast  # noqa: E402
from cotdyn.generation.run import run_reference  # noqa: E402
from cotdyn.plan.config import split_cell  # noqa: E402

ROWS, SUMMARY, REQUESTS, WORK = "gpu_sweep_vllm.jsonl", "gpu_sweep_vllm.json", "requests.json", "work.json"
DEFAULTS_LABEL = "vllm defaults"


# --- the grid ---------------------------------------------------------------------------------


def grid(max_num_seqs: list[int], max_num_batched_tokens: list[int], cudagraph_capture: list[str]) -> list[dict]:
    """The settings to try after vLLM's defaults, in order: each a model entry's ``vllm:`` options."""
    settings = []
    for seqs, tokens, graphs in itertools.product(max_num_seqs, max_num_batched_tokens, cudagraph_capture):
        setting = {"max_num_seqs": seqs, "max_num_batched_tokens": tokens, "enable_chunked_prefill": True}
        if graphs == "max_num_seqs":  # every full decode batch runs in a graph (vLLM caps them at 512)
            setting["max_cudagraph_capture_size"] = min(seqs, tokens)
        settings.append(setting)
    return settings


def label(setting: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or DEFAULTS_LABEL


def best_row(rows: list[dict]) -> dict | None:
    """The finished setting with the most generated tokens per second."""
    done = [r for r in rows if r["status"] == "ok"]
    return max(done, key=lambda r: r["tokens_per_s"]) if done else None


def vllm_block(entry_options: dict, setting: dict) -> str:
    """The model entry's ``vllm:`` with ``setting`` laid over what the config already names."""
    return yaml.safe_dump({"vllm": {**entry_options, **setting}}, sort_keys=False, default_flow_style=False)


# --- one setting, in its own process ----------------------------------------------------------


def requests_to_json(requests: list[Request]) -> list[dict]:
    return [{**asdict(r), "prompt_ids": list(r.prompt_ids)} for r in requests]


def requests_from_json(rows: list[dict]) -> list[Request]:
    return [Request(tuple(r["prompt_ids"]), r["n"], Sampling(**r["sampling"]), r["seed"], r["role"]) for r in rows]


def continuation_requests(work: dict, out: Path, backend) -> list[Request]:
    """The continuation phase's requests: read from ``out``, or made once (the reference chains
    through the rules' run_reference, then the requests as gpu_check_vllm builds them)."""
    path = out / REQUESTS
    if path.exists():
        return requests_from_json(json.loads(path.read_text()))
    config, cell = work["config"], work["cell"]
    spec, protocol = check.the_cell(config)
    problems, chains = out / L.problems(spec.benchmark_key), out / "chains.parquet"
    write_parquet(problems_table(load_benchmark(spec.benchmark)), problems)
    model = check.model_entry(spec, protocol)
    run_reference(
        problems,
        model,
        protocol,
        cell,
        spec.answer_rule,
        config["cache"],
        chains,
        out / "reference.json",
        backend=backend,
        observer=Forecast(),
    )
    requests, _ = check.continuation_requests(chains, protocol, cell, backend.tokenizer.decode)
    write_json(requests_to_json(requests), path)
    return requests


def run_setting(work: dict, setting: dict, out: Path) -> dict:
    """Build an engine with ``setting`` over the model entry, time the continuation phase once."""
    spec, protocol = check.the_cell(work["config"])
    model = check.model_entry(spec, protocol)
    model["vllm"] = {**model.get("vllm", {}), **setting}
    started = time.time()
    backend = make_backend(model)
    engine_start = time.time() - started
    made_here = not (out / REQUESTS).exists()
    requests = continuation_requests(work, out, backend)
    # The chains just generated sit in the prefix cache; every setting starts cold. vLLM answers
    # False when it could not empty the cache, and the row says so.
    reset = backend.llm.reset_prefix_cache() if made_here else None
    _, stats = generate(backend, requests, None, desc="continuations")
    figures = check.phase_figures(asdict(stats), work["flops_per_generated_token"], work["peak_tflops"])
    described = backend.describe()
    return {
        "engine_start_s": engine_start,
        "made_requests": made_here,
        "prefix_cache_reset": reset,
        **figures,
        "engine_settings": described["engine_settings"],
        "vllm_version": described["vllm_version"],
        "device": check.device_name(),
    }


def child_main(args) -> int:
    if args.dry_run:  # the stand-in with vLLM 0.26.0's fields, as gpu_check_vllm's dry run
        import vllm_standin  # beside this script

        sys.modules["vllm"] = vllm_standin.module(fields=vllm_standin.FIELDS_0_26, version="0.26.0-standin")
    os.chdir(ROOT)
    out = args.out.resolve()
    work = json.loads((out / WORK).read_text())
    row = run_setting(work, json.loads(args.setting), out)
    write_json(row, Path(args.row))
    return 0


# --- the sweep --------------------------------------------------------------------------------


def prepare(args, out: Path) -> dict:
    """The cell's config, narrowed and defaults-filled as gpu_check_vllm makes it, and the model
    directory written; saved for the settings' processes."""
    raw = yaml.safe_load(args.config.read_text())
    cell = args.cell or raw["cells"][0]
    model_dir = args.model_dir.resolve() if args.model_dir else Path(raw["models"][split_cell(cell)[0]]["id"]).resolve()
    tokenizer = None if args.dry_run else check.smollm2_tokenizer(args.tokenizer.resolve(), out / "tokenizer")
    model_config = check.write_model_dir(model_dir, tokenizer)
    problems = args.problems or (4 if args.dry_run else None)
    config, _ = check.with_defaults(check.study_config(args.config.resolve(), cell, model_dir, out, problems))
    spec, _ = check.the_cell(config)
    work = {
        "config": config,
        "cell": cell,
        "entry_vllm": dict(spec.model.get("vllm", {})),
        "flops_per_generated_token": check.flops_per_generated_token(model_config),
        "peak_tflops": args.peak_tflops,
    }
    write_json(work, out / WORK)
    return work


def run_child(args, out: Path, index: int, setting: dict, timeout: float) -> dict:
    """One setting in its own process group, stopped at ``timeout`` seconds."""
    row_path = out / "rows" / f"{index:02d}.json"
    row_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--child", json.dumps(setting)]
    command += ["--row", str(row_path)] + (["--dry-run"] if args.dry_run else [])
    log = (out / "rows" / f"{index:02d}.log").open("w")
    started = time.time()
    child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    try:
        code = child.wait(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        stop(child)
        code = None
    log.close()
    seconds = time.time() - started
    base = {"index": index, "label": label(setting), "setting": setting, "process_s": seconds}
    if code is None:
        return base | {"status": "timed out (budget)"}
    if code != 0 or not row_path.exists():
        tail = (out / "rows" / f"{index:02d}.log").read_text()[-2000:]
        return base | {"status": "failed", "exit_code": code, "log_tail": tail}
    return base | {"status": "ok"} | json.loads(row_path.read_text())


def stop(child: subprocess.Popen) -> None:
    """End the setting's process group (the engine's own processes with it): TERM, then KILL."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def sweep(args, out: Path, settings: list[dict], deadline: float) -> list[dict]:
    """Each setting in turn while the budget allows; every row appended to the JSONL as it ends."""
    rows, longest = [], 0.0
    (out / ROWS).write_text("")
    for index, setting in enumerate(settings):
        left = deadline - time.time()
        if left <= 0 or left < longest:
            row = {"index": index, "label": label(setting), "setting": setting, "status": "not run: budget"}
        else:
            row = run_child(args, out, index, setting, left)
            longest = max(longest, row["process_s"])
        rows.append(row)
        with (out / ROWS).open("a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        print(f"[{row['status']}] {row['label']}: {row.get('tokens_per_s')} tok/s", flush=True)
    return rows


def summary(rows: list[dict], work: dict, target: float) -> dict:
    best = best_row(rows)
    return {
        "cell": work["cell"],
        "peak_tflops": work["peak_tflops"],
        "flops_per_generated_token": work["flops_per_generated_token"],
        "target_utilisation": target,
        "rows": rows,
        "best": best,
        "best_meets_target": None if best is None else best["utilisation"] >= target,
        "not_run": [r["label"] for r in rows if r["status"] != "ok"],
        "vllm_block": None if best is None else vllm_block(work["entry_vllm"], best["setting"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    check.add_cell_arguments(parser)
    parser.add_argument("--max-num-seqs", type=int, nargs="+", default=[1024, 2048, 512])
    parser.add_argument("--max-num-batched-tokens", type=int, nargs="+", default=[16384, 32768])
    parser.add_argument("--cudagraph-capture", nargs="+", choices=["max_num_seqs", "default"], default=["max_num_seqs"])
    parser.add_argument("--no-defaults-row", action="store_true", help="skip the run with vLLM's own defaults")
    parser.add_argument("--budget-s", type=float, default=540.0, help="the whole sweep's time (default 540 s)")
    parser.add_argument("--peak-tflops", type=float, default=check.H200_DENSE_BF16_TFLOPS)
    parser.add_argument("--target-utilisation", type=float, default=0.6)
    parser.add_argument("--dry-run", action="store_true", help="on CPU against scripts/vllm_standin.py")
    parser.add_argument("--child", dest="setting", help=argparse.SUPPRESS)  # one setting's own process
    parser.add_argument("--row", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.setting is not None:
        return child_main(args)

    deadline = time.time() + args.budget_s
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)  # the config's own relative paths are the workflow's, from the root
    work = prepare(args, out)
    settings = ([] if args.no_defaults_row else [{}]) + grid(
        args.max_num_seqs, args.max_num_batched_tokens, args.cudagraph_capture
    )
    rows = sweep(args, out, settings, deadline)
    report = summary(rows, work, args.target_utilisation)
    write_json(report, out / SUMMARY)
    best = report["best"]
    if best is None:
        print("no setting finished; see the rows' logs under", out / "rows")
        return 1
    if args.dry_run:
        print("dry run: the stand-in's rates and utilisation mean nothing")
    print(
        f"best: {best['label']}: {best['tokens_per_s']:.0f} tok/s, {best['utilisation']:.1%} of "
        f"{work['peak_tflops']:g} TFLOP/s (target {args.target_utilisation:.0%}); not run or failed: "
        f"{report['not_run'] or 'none'}\nthe model entry's vllm: block:\n{report['vllm_block']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
