from cotdyn.files.logs import tee_to
from cotdyn.generation.run import run_reference

tee_to(snakemake.log[0])
run_reference(
    snakemake.input.problems,
    snakemake.params.model,
    snakemake.params.protocol,
    snakemake.wildcards.cell,
    snakemake.params.benchmark,
    snakemake.params.cache,
    snakemake.output.chains,
    snakemake.output.generation,
    benchmark_entry=snakemake.params.benchmark_entry,
    first_writer_wins=True,  # a second job of this cell and phase overwrites nothing (docs/cluster.md)
)
