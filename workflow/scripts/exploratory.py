from pathlib import Path

import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.report.exploratory_tables import write_exploratory

tee_to(snakemake.log[0])
records = pd.concat([pd.read_parquet(r) for r in snakemake.input.records], ignore_index=True)
p = snakemake.params
for path in write_exploratory(
    records,
    Path(snakemake.output.tables[0]).parent,
    m=int(p.m),
    epsilon=float(p.epsilon),
    seed=int(p.seed),
    resamples=int(p.resamples),
    level=float(p.level),
):
    print(path)
