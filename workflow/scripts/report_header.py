from cotdyn.files.logs import tee_to
from cotdyn.provenance.integrity import stored_check
from cotdyn.report.header import write_header

tee_to(snakemake.log[0])
print(
    write_header(
        snakemake.wildcards.variant,
        snakemake.input.hypotheses,
        snakemake.input.plan_check,
        snakemake.output[0],
        snakemake.input.audit,
        stored_check(snakemake.params.study_dir),
    )
)
