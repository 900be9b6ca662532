from pathlib import Path

from cotdyn.files.logs import tee_to
from cotdyn.plan.load import load_plan
from cotdyn.report.secondary_tables import derive_generations

tee_to(snakemake.log[0])
out_dir = Path(snakemake.output.html).parent
plan = load_plan(snakemake.input.plan)
p = snakemake.params
for path in derive_generations(
    list(snakemake.input.records), list(snakemake.input.hypotheses), p.protocols, plan, out_dir, p.benchmarks
):
    print(path)
