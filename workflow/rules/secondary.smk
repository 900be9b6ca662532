# Seed 003's further analyses (docs/reference.md section 6; cotdyn.analysis.secondary), when the plan pre-specifies
# them (analysis.secondary): per variant from its records and hypotheses.json, and across the
# generations that differ only in their seed or reference budget.
from cotdyn.report.secondary_tables import GENERATION_TABLES, TABLES as SECONDARY_TABLES, TABLES_HTML as SECONDARY_HTML


rule secondary:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        hypotheses=f"{STUDY_DIR}/analysis/{{variant}}/hypotheses.json",
        plan=PLAN_PATH,
    output:
        tables=[
            secondary_item(f"{STUDY_DIR}/analysis/{{variant}}/secondary", f"{t}.csv", "table", "{variant}")
            for t in SECONDARY_TABLES
        ],
        html=secondary_item(f"{STUDY_DIR}/analysis/{{variant}}/secondary", SECONDARY_HTML, "tables", "{variant}"),
    log:
        f"{STUDY_DIR}/logs/secondary/{{variant}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/secondary/{{variant}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("secondary.py"),
        epsilon=lambda w: PROTOCOLS[w.variant]["epsilon"],
        plan_sha256=PLAN_SHA256,
        signals=caption_list(registered_signals()),  # read by the captions
    script:
        "../scripts/secondary.py"


rule generations:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/records.parquet", cell=CELLS, variant=VARIANTS),
        hypotheses=expand(f"{STUDY_DIR}/analysis/{{variant}}/hypotheses.json", variant=VARIANTS),
        plan=PLAN_PATH,
    output:
        tables=[
            secondary_item(f"{STUDY_DIR}/analysis/generations", f"{t}.csv", "table", "generations")
            for t in GENERATION_TABLES
        ],
        html=secondary_item(f"{STUDY_DIR}/analysis/generations", SECONDARY_HTML, "tables", "generations"),
    log:
        f"{STUDY_DIR}/logs/generations.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/generations.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("generations.py"),
        protocols=PROTOCOLS,
        benchmarks={c: CELL_SPECS[c].answer_rule for c in CELLS},
        plan_sha256=PLAN_SHA256,
    script:
        "../scripts/generations.py"
