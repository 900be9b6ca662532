from cotdyn.files.logs import tee_to
from cotdyn.provenance.seal import check_sealed
from cotdyn.records.export import write_samples_jsonl

tee_to(snakemake.log[0])
# exported only from what generation wrote (cotdyn.provenance.seal)
check_sealed(snakemake.input.samples)
write_samples_jsonl(snakemake.input.samples, snakemake.output.jsonl)
