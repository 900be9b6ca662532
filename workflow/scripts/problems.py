from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_parquet

tee_to(snakemake.log[0])
problems = load_benchmark(snakemake.params.spec)
print(f"{snakemake.wildcards.benchmark}: {len(problems)} problems")
write_parquet(problems_table(problems), snakemake.output[0])
