from cotdyn.files.logs import tee_to
from cotdyn.generation.estimate import Forecast
from cotdyn.generation.failures import one_line_failures
from cotdyn.generation.run import run_reference
from cotdyn.generation.sealing import seal_chains
from cotdyn.provenance.seal import unsealed_path

tee_to(snakemake.log[0])
# chunk_size from the config itself, not a param: no sample depends on it (cotdyn.workflow.params.PERFORMANCE_KEYS)
chunking = {"chunk_size": snakemake.config["models"][snakemake.params.model_key].get("chunk_size", 0)}
# written under other names, then placed with the seal, first writer wins (cotdyn.provenance.seal.write_seal)
# a server's failure ends the job in one named line, not a traceback (cotdyn.generation.failures)
with one_line_failures(f"reference of {snakemake.wildcards.cell}"):
    run_reference(
        snakemake.input.problems,
        {**snakemake.params.model, **chunking},
        snakemake.params.protocol,
        snakemake.wildcards.cell,
        snakemake.params.benchmark,
        snakemake.params.cache,
        unsealed_path(snakemake.output.chains),
        unsealed_path(snakemake.output.generation),
        observer=Forecast(),
    )
seal_chains(
    snakemake.output.chains,
    snakemake.output.generation,
    snakemake.params.protocol,
    snakemake.wildcards.cell,
    staged=True,
)
