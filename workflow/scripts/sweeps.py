from cotdyn.files.logs import tee_to
from cotdyn.report.exploratory_tables import derive_sweeps

tee_to(snakemake.log[0])
p = snakemake.params
# the audit re-derives both files with the same function (cotdyn.audit.derive_outputs)
for path in derive_sweeps(
    snakemake.input.summaries,
    snakemake.input.records,
    p.registered,
    seed=int(p.seed),
    resamples=int(p.resamples),
    level=float(p.level),
    out_csv=snakemake.output.csv,
    out_html=snakemake.output.html,
):
    print(path)
