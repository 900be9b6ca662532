from pathlib import Path

import pandas as pd

from cotdyn.dynamics_plots import write_dynamics
from cotdyn.logs import tee_to
from cotdyn.protocol import with_chain_endpoint

tee_to(snakemake.log[0])
# Seed 002's last state is the answer given the complete trace: for a finished chain that is the
# chain's own answer, not the (empty) continuation of its full prefix.
samples = pd.concat(
    [
        with_chain_endpoint(pd.read_parquet(s), pd.read_parquet(c)).assign(cell=cell)
        for cell, s, c in zip(snakemake.params.cells, snakemake.input.samples, snakemake.input.chains)
    ],
    ignore_index=True,
)
records = pd.concat([pd.read_parquet(r) for r in snakemake.input.records], ignore_index=True)
for path in write_dynamics(samples, records, Path(snakemake.output.profiles).parent):
    print(path)
