"""Snakemake entry point of rule infogain_cell: supervisor, ORM and information-gain tables of one cell."""

import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_csv, write_json
from cotdyn.methods.infogain.real import SupervisorSpec, run_cell
from cotdyn.methods.infogain.traces import step_chains

tee_to(snakemake.log[0])
chains = pd.read_parquet(snakemake.input.chains)
records = pd.read_parquet(snakemake.input.records, columns=["problem_id", "chain_correct"])
chains = chains.drop(columns=["chain_correct"], errors="ignore").merge(records, on="problem_id", how="left")
problems = pd.read_parquet(snakemake.input.problems)
split = pd.read_csv(snakemake.input.split, dtype={"problem_id": str})
ms = pd.read_csv(snakemake.input.math_shepherd, dtype={"problem_id": str})
ms = ms[ms["cell"] == snakemake.wildcards.cell]
steps = step_chains(chains, problems, snakemake.params.segmentation, snakemake.params.cap)
spec = SupervisorSpec.from_config(snakemake.params.supervisor, int(snakemake.params.seed))
result = run_cell(steps, split, ms, spec)
summary = dict(result["summary"], cell=snakemake.wildcards.cell)
print({k: summary[k] for k in ("split_sizes", "status_counts", "leakage", "reason")})
print(result["detection"].to_string(index=False))
for name in ("steps", "aggregate", "detection", "training"):
    write_csv(result[name], snakemake.output[name])
write_json(summary, snakemake.output.summary)
if not summary["leakage"]["ok"]:
    raise RuntimeError(f"infogain split leaks: {summary['leakage']}")
