from pathlib import Path

import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.report.grading import grading_tables, write_grading

tee_to(snakemake.log[0])
tables = grading_tables(
    pd.read_parquet(snakemake.input.chains),
    pd.read_parquet(snakemake.input.samples),
    pd.read_parquet(snakemake.input.problems),
    snakemake.params.benchmark,
    snakemake.wildcards.cell,
    snakemake.params.answer_form,
)
for path in write_grading(tables, Path(snakemake.output.tables[0]).parent):
    print(path)
