rule records:
    input:
        chains=lambda w: chains_path(w.cell, w.variant),
        samples=lambda w: samples_path(w.cell, w.variant),
        seals=lambda w: [
            str(seal_path(chains_file(w.cell, w.variant))),
            str(seal_path(samples_file(w.cell, w.variant))),
        ],
        problems=lambda w: f"{STUDY_DIR}/problems/{CELL_SPECS[w.cell].benchmark_key}.parquet",
        damaged=rebuild_damaged_tables,
    output:
        records=f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/records.parquet",
        summary=f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/summary.json",
    log:
        f"{STUDY_DIR}/logs/records/{{cell}}/{{variant}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/records/{{cell}}/{{variant}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("records.py"),
        protocol=lambda w: PROTOCOLS[w.variant],
        exclusion=PLAN["exclusion"],
        groups=PLAN["analysis"].get("groups"),
        cut_answers=lambda w: CUT_ANSWERS[w.variant],
        benchmark=lambda w: CELL_SPECS[w.cell].answer_rule,
        signals=config.get("signals", []),
    script:
        "../scripts/records.py"
