"""Snakemake entry point of rule infogain_toy: the seed-000 toy experiment into the rule's directory."""

import json
import time
from pathlib import Path

from cotdyn.files.logs import tee_to
from cotdyn.methods.infogain.experiment.run import run_toy_experiment

if __name__ == "__main__":  # the five LLMs may run in spawned processes, which re-import this file
    tee_to(snakemake.log[0])
    out_dir = Path(snakemake.output.summary).parent
    started = time.perf_counter()
    result = run_toy_experiment(snakemake.params.size, int(snakemake.params.seed), out_dir, n_jobs=snakemake.threads)
    for row in result["timing"]:
        print(f"{row['llm']}: {row['seconds']:.1f} s")
    print(f"total: {time.perf_counter() - started:.1f} s with {snakemake.threads} process(es)")
    print(result["table1"].to_string(index=False))
    checks = result["acceptance"]
    print(
        json.dumps(
            {k: checks[k] for k in ("ig_drop_step", "llm3_orm_fall_step", "llm3_ms_range", "passed")},
            sort_keys=True,
            indent=1,
        )
    )
    if not checks["passed"]:
        print("WARNING: the toy experiment does not reproduce seed 000's pattern (see acceptance.json)")
    expected = {Path(p).name for p in snakemake.output}
    written = {p.name for p in result["files"]}
    if expected - written:
        raise RuntimeError(f"infogain_toy did not write {sorted(expected - written)}")
