from pathlib import Path

from cotdyn.files.logs import tee_to
from cotdyn.plan.load import load_plan
from cotdyn.report.secondary_tables import derive_secondary

tee_to(snakemake.log[0])
out_dir = Path(snakemake.output.html).parent
plan = load_plan(snakemake.input.plan)
for path in derive_secondary(
    list(snakemake.input.records), snakemake.input.hypotheses, plan, float(snakemake.params.epsilon), out_dir
):
    print(path)
