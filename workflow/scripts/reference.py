from cotdyn.files.logs import tee_to
from cotdyn.generation.run import run_reference
from cotdyn.generation.sealing import seal_chains

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
)
# the seal: what generation wrote, recorded as it wrote it (cotdyn.provenance.seal)
seal_chains(snakemake.output.chains, snakemake.output.generation, snakemake.params.protocol, snakemake.wildcards.cell)
