from cotdyn.files.logs import tee_to
from cotdyn.generation.run import run_continuations

tee_to(snakemake.log[0])
run_continuations(
    snakemake.input.problems,
    snakemake.input.chains,
    snakemake.params.model,
    snakemake.params.protocol,
    snakemake.wildcards.cell,
    snakemake.params.benchmark,
    snakemake.params.cache,
    snakemake.output.samples,
    snakemake.output.generation,
    benchmark_entry=snakemake.params.benchmark_entry,
    first_writer_wins=True,  # a second job of this cell and phase overwrites nothing (docs/cluster.md)
)
