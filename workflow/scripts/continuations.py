from cotdyn.files.logs import tee_to
from cotdyn.generation.run import run_continuations
from cotdyn.generation.timings import TimingObserver

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
    observer=TimingObserver(benchmark_entry=snakemake.params.benchmark_entry),
)
