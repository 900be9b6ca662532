"""Wall time and peak memory of ``cotdyn audit`` on a panel-sized simulated study, against the records
rule's own time on the same study in the same run (docs/reference.md section 7; issue 61 item 2).

    python benchmarks/bench_audit.py [--study WORKDIR] [--models 4] [--keep]

The study: the panel's shape on the simulated backend, ``--models`` models (4: the panel's 8 cells)
on GSM8K (1319) and MATH-500 (500) from data/, the registered variant, run through the workflow's
own DAG once (``snakemake --cores 2``, some 10 minutes on 2 cores) into WORKDIR/results/panel-sim;
``--study WORKDIR`` reuses a study built so before (its study.yaml is checked against the one this
script writes, so a reused study is the one measured). The build is not timed.

Timed, in this order, each in a fresh interpreter (the reviewer's command, whose imports count):

- baseline: the records rule over every cell (``cotdyn.records.derive.derive_records`` on each
  cell's stored chains and samples, as rule ``records`` runs it, into a scratch folder);
- ``cotdyn audit DIR``: the reviewer's whole audit (re-derivation, hashes, raw-file checks against
  seals and the cache, pages).

Peak memory is the largest resident set size of the command's process (with any child it starts,
summed), sampled every 50 ms (psutil). The audit runs in one process. The load average before and
after is printed too: on a shared machine the wall times depend on it, the CPU seconds and memory
much less. Targets: the audit at most 40 s of wall time on 2 cores and at most 700 MB, whatever the
number of models.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STUDY = "panel-sim"
MODELS = ("qwen7b", "mistral7b", "llama31-8b", "r1-distill-7b", "m5", "m6", "m7", "m8")
TARGET_S, TARGET_MB = 40.0, 700.0


def panel_config(workdir: Path, models: int) -> dict:
    """The simulated panel: ``models`` models with config/simulated.yaml's planted misbehaviour, each
    planting another monotone share, on both benchmarks in full."""
    base = yaml.safe_load((ROOT / "config" / "simulated.yaml").read_text())["models"]["qwen7b"]
    names = MODELS[:models]
    planted = {n: {**base["planted"], "monotone_share": round(0.45 + 0.1 * i, 2)} for i, n in enumerate(names)}
    return {
        "study": STUDY,
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(workdir / "cache"),
        "cells": [f"{n}-{b}" for n in names for b in ("gsm8k", "math500")],
        "models": {n: {**base, "planted": planted[n]} for n in names},
        "benchmarks": {
            "gsm8k": {"kind": "gsm8k", "path": str(ROOT / "data" / "gsm8k_test.jsonl")},
            "math500": {"kind": "math500", "path": str(ROOT / "data" / "math500_test.jsonl")},
        },
        "variants": {"registered": {}},
    }


def build(workdir: Path, models: int) -> Path:
    """The study of ``panel_config``, built through the DAG unless WORKDIR holds it already."""
    config = panel_config(workdir, models)
    path = workdir / "study.yaml"
    if path.exists() and yaml.safe_load(path.read_text()) != config:
        sys.exit(f"{path} is another config than this script writes for --models {models}; use another --study")
    workdir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    study = workdir / "results" / STUDY
    if not (study / "manifest" / "manifest.json").exists():
        print(f"building the study in {workdir} (not timed) ...", flush=True)
        command = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--workflow-profile"]
        subprocess.run([*command, "none", "--configfile", str(path), "--cores", "2"], cwd=workdir, check=True)
    return study


def measured(command: list[str]) -> tuple[float, float, float, int, str, float]:
    """(wall s, peak MB of the process tree's summed RSS, peak MB of its largest process, return code,
    output's verdict or last lines, CPU s of the tree) of ``command``."""
    import psutil

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True)
        peak, largest, parent = 0, 0, psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [parent, *parent.children(recursive=True)]
                sizes = [p.memory_info().rss for p in tree]
                peak, largest = max(peak, sum(sizes)), max(largest, *sizes)
            except (psutil.Error, OSError):  # a process ended between the listing and the reading
                pass
            time.sleep(0.05)
        wall = time.perf_counter() - start
        out.seek(0)
        lines = out.read().splitlines()
        # the verdict and what failed, else the last lines (a traceback)
        named = [
            line for line in lines if line.startswith(("audit of", "  problem:", "  mismatch", "  missing", "  extra"))
        ]
        tail = "\n".join(named[:8] or lines[-3:])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu  # on a shared machine, steadier than the wall time
    return wall, peak / 2**20, largest / 2**20, proc.returncode, tail, cpu


RECORDS = """
import sys, tempfile, yaml
from pathlib import Path
from cotdyn.generation.backends.validation import validate_config
from cotdyn.files.layout import reference_file, variant_file
from cotdyn.plan.config import reference_id, resolve_cells, study_protocols
from cotdyn.plan.load import load_plan
from cotdyn.records.derive import derive_records
study = Path(sys.argv[1])
config = validate_config(yaml.safe_load(open(sys.argv[2])), sys.argv[2])
plan = load_plan(config["plan"])
protocol = study_protocols(config, plan)["registered"]
with tempfile.TemporaryDirectory() as out:
    for name, spec in resolve_cells(config, plan, "config").items():
        chains = study / reference_file(name, reference_id(protocol), "chains.parquet")
        samples = study / variant_file(name, "registered", "samples.parquet")
        derive_records(chains, samples, protocol, plan["exclusion"], spec.answer_rule, name,
                       Path(out) / name / "records.parquet", Path(out) / name / "summary.json",
                       groups=plan["analysis"].get("groups"), problems_path=study / f"problems/{spec.benchmark_key}.parquet")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, help="the workflow folder of a study this script built before")
    parser.add_argument("--models", type=int, default=4, choices=range(1, len(MODELS) + 1))
    parser.add_argument("--keep", action="store_true", help="keep the study built in a scratch folder")
    args = parser.parse_args()
    workdir = args.study or Path(tempfile.mkdtemp(prefix="cotdyn-bench-audit-"))
    study = build(workdir.resolve(), args.models)
    problems = sum(1 for _ in open(ROOT / "data" / "gsm8k_test.jsonl")) + sum(
        1 for _ in open(ROOT / "data" / "math500_test.jsonl")
    )
    print(f"study: {study} ({2 * args.models} cells, {args.models * problems} problems); {os.cpu_count()} CPUs "
          f"visible; load average {os.getloadavg()[0]:.1f}")  # fmt: skip

    records = measured([sys.executable, "-c", RECORDS, str(study), str(workdir / "study.yaml")])
    if records[3] != 0:
        sys.exit(f"the records rule failed (rc {records[3]}): {records[4]}")
    print(
        f"baseline, the records rule over every cell (one interpreter): {records[0]:.1f} s wall, "
        f"{records[5]:.1f} CPU s, peak {records[1]:.0f} MB"
    )
    plan = str(ROOT / "preregistration" / "plan.yaml")  # the reviewer's own, as rule audit names it
    audit = measured([sys.executable, "-m", "cotdyn.cli.main", "audit", str(study), "--plan", plan])
    print(f"cotdyn audit: {audit[0]:.1f} s wall (target <= {TARGET_S:.0f} s), {audit[5]:.1f} CPU s, peak "
          f"{audit[1]:.0f} MB RSS (target <= {TARGET_MB:.0f} MB); rc {audit[3]}; load average after "
          f"{os.getloadavg()[0]:.1f}:\n{audit[4]}")  # fmt: skip
    print(f"ratios: audit / records rule {audit[0] / records[0]:.2f}x wall, {audit[5] / records[5]:.2f}x CPU, "
          f"{audit[1] / records[1]:.2f}x peak memory")  # fmt: skip
    if args.study is None and not args.keep:
        import shutil

        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
