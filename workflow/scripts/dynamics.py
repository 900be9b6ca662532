from pathlib import Path

import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.records.table import variant_samples
from cotdyn.report.dynamics_plots import write_dynamics

tee_to(snakemake.log[0])
# The variant's own m and endpoint (its samples may be a parent's): under endpoint 'reasoning' the
# last state was sampled from the chain cut before its answer (seed 002 Def. 1); 'chain_answer'
# forces it to the chain's own answer.
protocol = snakemake.params.protocol
samples = pd.concat(
    [
        variant_samples(pd.read_parquet(s), pd.read_parquet(c), protocol).assign(cell=cell)
        for cell, s, c in zip(snakemake.params.cells, snakemake.input.samples, snakemake.input.chains)
    ],
    ignore_index=True,
)
records = pd.concat([pd.read_parquet(r) for r in snakemake.input.records], ignore_index=True)
written = write_dynamics(
    samples,
    records,
    Path(snakemake.output.profiles).parent,
    null_class=protocol["null_answers"] == "class",
    benchmarks=dict(zip(snakemake.params.cells, snakemake.params.benchmarks)),
    equivalence=protocol["equivalence"],
    answer_form=protocol["answer_form"],
    endpoint=protocol["endpoint"],
)
declared = {Path(p) for p in snakemake.output}
undeclared = [str(p) for p in written if p not in declared]
if undeclared:
    raise RuntimeError(f"dynamics wrote files its rule does not declare: {undeclared}")
for path in written:
    print(path)
