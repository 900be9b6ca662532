import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_text
from cotdyn.methods.math_shepherd import math_shepherd_csv
from cotdyn.records.table import variant_samples

tee_to(snakemake.log[0])
# the variant's own m, endpoint, equivalence and answer form (its samples may be a parent's);
# the audit re-derives the file with the same function (cotdyn.audit.derive_outputs)
protocol = snakemake.params.protocol
cells = []
for cell, benchmark, s, c, r in zip(
    snakemake.params.cells,
    snakemake.params.benchmarks,
    snakemake.input.samples,
    snakemake.input.chains,
    snakemake.input.records,
):
    chains = pd.read_parquet(c)
    cells.append((cell, benchmark, variant_samples(pd.read_parquet(s), chains, protocol), chains, pd.read_parquet(r)))
write_text(math_shepherd_csv(cells, protocol), snakemake.output[0])
