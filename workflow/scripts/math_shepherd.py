import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_text
from cotdyn.methods.math_shepherd import math_shepherd_from_samples
from cotdyn.records.table import variant_samples

tee_to(snakemake.log[0])
# the variant's own m, endpoint, equivalence and answer form (its samples may be a parent's)
protocol = snakemake.params.protocol
tables = [
    math_shepherd_from_samples(
        variant_samples(pd.read_parquet(s), pd.read_parquet(c), protocol),
        pd.read_parquet(r),
        benchmark,
        protocol["equivalence"],
        # the last prefix is the whole chain only under the registered endpoint
        pd.read_parquet(c) if protocol["endpoint"] == "continuation" else None,
        protocol["answer_form"],
    ).assign(cell=cell)
    for cell, benchmark, s, c, r in zip(
        snakemake.params.cells,
        snakemake.params.benchmarks,
        snakemake.input.samples,
        snakemake.input.chains,
        snakemake.input.records,
    )
]
table = pd.concat(tables, ignore_index=True)
csv = table[["cell"] + [c for c in table.columns if c != "cell"]].to_csv(index=False, float_format="%.10g")
write_text(csv, snakemake.output[0])
