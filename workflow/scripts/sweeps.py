import json
from pathlib import Path

import pandas as pd

from cotdyn.analysis.exploratory import analyzed
from cotdyn.analysis.secondary import sweep_columns
from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_csv, write_text
from cotdyn.report.exploratory_tables import sweep_frame, sweeps_html
from cotdyn.stats import cell_resamples

tee_to(snakemake.log[0])
p = snakemake.params
summaries, records, extras = {}, {}, {}
# each path is .../cells/<cell>/<variant>/<file>: read the pair from the path, not from input order
for s, r in zip(sorted(snakemake.input.summaries), sorted(snakemake.input.records)):
    cell, variant = Path(s).parent.parent.name, Path(s).parent.name
    assert (cell, variant) == (Path(r).parent.parent.name, Path(r).parent.name), (s, r)
    summaries.setdefault(variant, {})[cell] = json.loads(Path(s).read_text())
    frame = pd.read_parquet(r, columns=["reference_tokens", "raw_units", "coherence", "correct", "excluded"])
    records.setdefault(variant, {})[cell] = frame
    n = len(analyzed(frame))
    idx = cell_resamples(int(p.seed), cell, n, int(p.resamples)) if n else None
    extras.setdefault(variant, {})[cell] = sweep_columns(frame, idx, float(p.level))
frame = sweep_frame(summaries, records, p.registered, extras)
print(write_csv(frame, Path(snakemake.output.csv)))
write_text(sweeps_html(frame, p.registered), snakemake.output.html)
print(snakemake.output.html)
