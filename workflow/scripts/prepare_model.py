from pathlib import Path

from cotdyn.files.logs import tee_to
from cotdyn.generation.backends.transformers import convert_gguf

tee_to(snakemake.log[0])
gguf = snakemake.params.gguf
out = convert_gguf(gguf["package"], gguf["file"], Path(snakemake.output[0]).parent)
print(f"converted {gguf['package']}/{gguf['file']} to {out}")
