from cotdyn.files.logs import tee_to
from cotdyn.plan.registration import write_plan_check

tee_to(snakemake.log[0])
check = write_plan_check(snakemake.params.plan, dict(snakemake.params.config), snakemake.output[0])
for cell, entry in check["cells"].items():
    print(f"{cell}: confirmatory={entry['confirmatory']}, declared deviations: {len(entry.get('deviations', []))}")
