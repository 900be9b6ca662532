"""Snakemake entry point of rule infogain_tables: every cell's test-split IG and detection in two tables."""

import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_csv

tee_to(snakemake.log[0])
cells = snakemake.params.cells
ig = pd.concat([pd.read_csv(p).assign(cell=c) for c, p in zip(cells, snakemake.input.aggregate)], ignore_index=True)
ig = ig[ig["split"] == "test"]
detection = pd.concat(
    [
        pd.read_csv(p, keep_default_na=False, na_values=[""]).assign(cell=c)
        for c, p in zip(cells, snakemake.input.detection)
    ],
    ignore_index=True,
)
write_csv(ig[["cell"] + [c for c in ig.columns if c != "cell"]], snakemake.output.ig)
write_csv(detection[["cell"] + [c for c in detection.columns if c != "cell"]], snakemake.output.detection)
