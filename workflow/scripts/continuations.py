from cotdyn.files.logs import tee_to
from cotdyn.generation.run import run_continuations
from cotdyn.generation.sealing import seal_samples
from cotdyn.provenance.seal import check_sealed

tee_to(snakemake.log[0])
check_sealed(snakemake.input.chains)
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
)
# the seal: what generation wrote, recorded as it wrote it (cotdyn.provenance.seal)
seal_samples(
    snakemake.output.samples,
    snakemake.input.chains,
    snakemake.output.generation,
    snakemake.params.protocol,
    snakemake.wildcards.cell,
)
