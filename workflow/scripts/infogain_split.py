"""Snakemake entry point of rule infogain_split: a benchmark's problems into train / val / test."""

import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_csv
from cotdyn.methods.infogain.traces import split_problems

tee_to(snakemake.log[0])
problems = pd.read_parquet(snakemake.input[0])
split = split_problems(problems["problem_id"].astype(str), snakemake.params.fractions, int(snakemake.params.seed))
print(split["split"].value_counts().sort_index().to_string())
write_csv(split, snakemake.output[0])
