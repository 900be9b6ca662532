from cotdyn.files.logs import tee_to
from cotdyn.generation.estimate import Forecast
from cotdyn.generation.failures import one_line_failures
from cotdyn.generation.run import run_continuations
from cotdyn.generation.sealing import seal_samples
from cotdyn.provenance.seal import check_sealed, unsealed_path

tee_to(snakemake.log[0])
# chunk_size from the config itself, not a param: no sample depends on it (cotdyn.workflow.params.PERFORMANCE_KEYS)
chunking = {"chunk_size": snakemake.config["models"][snakemake.params.model_key].get("chunk_size", 0)}
check_sealed(snakemake.input.chains)
# written under other names, then placed with the seal, first writer wins (cotdyn.provenance.seal.write_seal)
# a server's failure ends the job in one named line, not a traceback (cotdyn.generation.failures)
with one_line_failures(f"continuations of {snakemake.wildcards.cell}"):
    run_continuations(
        snakemake.input.problems,
        snakemake.input.chains,
        {**snakemake.params.model, **chunking},
        snakemake.params.protocol,
        snakemake.wildcards.cell,
        snakemake.params.benchmark,
        snakemake.params.cache,
        unsealed_path(snakemake.output.samples),
        unsealed_path(snakemake.output.generation),
        observer=Forecast(),
    )
seal_samples(
    snakemake.output.samples,
    snakemake.input.chains,
    snakemake.output.generation,
    snakemake.params.protocol,
    snakemake.wildcards.cell,
    staged=True,
)
