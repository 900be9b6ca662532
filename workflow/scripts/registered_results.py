from cotdyn.files.logs import tee_to
from cotdyn.provenance.integrity import stored_check
from cotdyn.report.pages import write_registered_results

tee_to(snakemake.log[0])
print(
    write_registered_results(
        snakemake.wildcards.variant,
        snakemake.input.hypotheses,
        snakemake.input.audit,
        stored_check(snakemake.params.study_dir),
        snakemake.output[0],
    )
)
