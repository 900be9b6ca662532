import json
from pathlib import Path

import pandas as pd

from cotdyn.exploratory_report import sweep_frame, sweeps_html
from cotdyn.logs import tee_to
from cotdyn.writers import write_csv

tee_to(snakemake.log[0])
summaries, records = {}, {}
# each path is .../cells/<cell>/<variant>/<file>: read the pair from the path, not from input order
for s, r in zip(sorted(snakemake.input.summaries), sorted(snakemake.input.records)):
    cell, variant = Path(s).parent.parent.name, Path(s).parent.name
    assert (cell, variant) == (Path(r).parent.parent.name, Path(r).parent.name), (s, r)
    summaries.setdefault(variant, {})[cell] = json.loads(Path(s).read_text())
    records.setdefault(variant, {})[cell] = pd.read_parquet(r, columns=["reference_tokens"])
frame = sweep_frame(summaries, records, snakemake.params.registered)
print(write_csv(frame, Path(snakemake.output.csv)))
Path(snakemake.output.html).write_text(sweeps_html(frame, snakemake.params.registered))
print(snakemake.output.html)
