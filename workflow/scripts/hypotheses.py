from cotdyn.audit.check import derive_analysis
from cotdyn.files.logs import tee_to

tee_to(snakemake.log[0])
out_dir = snakemake.output[0].rsplit("/", 1)[0]
for path in derive_analysis(list(snakemake.input.records), snakemake.input.plan, snakemake.input.plan_check, out_dir):
    print(path)
