from cotdyn.files.logs import tee_to
from cotdyn.files.writers import write_text
from cotdyn.report.grading import grading_page, read_grading

tee_to(snakemake.log[0])
tables = {cell: read_grading(folder) for cell, folder in zip(snakemake.params.cells, snakemake.params.folders)}
print(write_text(grading_page(tables, snakemake.params.variant), snakemake.output[0]))
