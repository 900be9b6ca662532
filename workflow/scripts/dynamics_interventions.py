from pathlib import Path

import pandas as pd

from cotdyn.files.logs import tee_to
from cotdyn.methods.dynamics_interventions import write_interventions

tee_to(snakemake.log[0])
profiles = {v: pd.read_csv(p) for v, p in zip(snakemake.params.variants, snakemake.input.profiles)}
written = write_interventions(profiles, dict(snakemake.params.comparisons), Path(snakemake.output.changes).parent)
undeclared = [str(p) for p in written if p not in {Path(o) for o in snakemake.output}]
if undeclared:
    raise RuntimeError(f"dynamics_interventions wrote files its rule does not declare: {undeclared}")
for path in written:
    print(path)
