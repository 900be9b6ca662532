import pandas as pd

from cotdyn.logs import tee_to
from cotdyn.math_shepherd import math_shepherd_from_samples

tee_to(snakemake.log[0])
tables = [
    math_shepherd_from_samples(pd.read_parquet(s), pd.read_parquet(r), benchmark, pd.read_parquet(c)).assign(cell=cell)
    for cell, benchmark, s, r, c in zip(
        snakemake.params.cells,
        snakemake.params.benchmarks,
        snakemake.input.samples,
        snakemake.input.records,
        snakemake.input.chains,
    )
]
table = pd.concat(tables, ignore_index=True)
table[["cell"] + [c for c in table.columns if c != "cell"]].to_csv(
    snakemake.output[0], index=False, float_format="%.10g"
)
