# Math-Shepherd labels of the study's own traces, from the continuations already drawn (seed 000);
# a finished chain's last prefix is completed by the chain itself (cotdyn.methods.math_shepherd).
rule math_shepherd:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        samples=lambda w: [samples_path(cell, w.variant) for cell in CELLS],
        chains=lambda w: [chains_path(cell, w.variant) for cell in CELLS],
    output:
        f"{STUDY_DIR}/analysis/{{variant}}/math_shepherd.csv",
    log:
        f"{STUDY_DIR}/logs/math_shepherd/{{variant}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/math_shepherd/{{variant}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("math_shepherd.py"),
        cells=CELLS,
        benchmarks=[CELL_SPECS[c].answer_rule for c in CELLS],
        protocol=lambda w: PROTOCOLS[w.variant],
    script:
        "../scripts/math_shepherd.py"


# Information gain on the study's own traces (seed 000 section 3.4; docs/reference.md section 9), when the
# config has infogain.traces: the variant's chains cut into its registered units, problems split
# train / val / test by a seeded hash of their id (shared by every cell of a benchmark), a LoRA
# supervisor and an ORM per cell on the train chains, thresholds from the validation chains.
rule infogain_split:
    input:
        f"{STUDY_DIR}/problems/{{benchmark}}.parquet",
    output:
        f"{IG_DIR}/split/{{benchmark}}.csv",
    log:
        f"{STUDY_DIR}/logs/infogain_split/{{benchmark}}.log",
    conda:
        "../../envs/generate-cpu.yaml"  # the env of every infogain rule
    params:
        code=code_of("infogain_split.py"),
        fractions=lambda w: INFOGAIN_TRACES.get("split", [0.6, 0.2, 0.2]),
        seed=lambda w: INFOGAIN_TRACES.get("seed", 0),
    script:
        "../scripts/infogain_split.py"


rule infogain_cell:
    input:
        chains=lambda w: chains_path(w.cell, IG_VARIANT),
        records=lambda w: f"{STUDY_DIR}/cells/{w.cell}/{IG_VARIANT}/records.parquet",
        problems=lambda w: f"{STUDY_DIR}/problems/{CELL_SPECS[w.cell].benchmark_key}.parquet",
        split=lambda w: f"{IG_DIR}/split/{CELL_SPECS[w.cell].benchmark_key}.csv",
        math_shepherd=lambda w: f"{STUDY_DIR}/analysis/{IG_VARIANT}/math_shepherd.csv",
    output:
        steps=f"{IG_DIR}/{{cell}}/steps.csv",
        aggregate=f"{IG_DIR}/{{cell}}/aggregate.csv",
        detection=f"{IG_DIR}/{{cell}}/detection.csv",
        training=f"{IG_DIR}/{{cell}}/training_history.csv",
        summary=f"{IG_DIR}/{{cell}}/summary.json",
    log:
        f"{STUDY_DIR}/logs/infogain_cell/{{cell}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/infogain_cell/{{cell}}.tsv"
    conda:
        infogain_env()
    threads: 2
    resources:
        gpu=lambda w: 1 if str(INFOGAIN_TRACES["supervisor"].get("device", "cpu")).startswith("cuda") else 0,
    params:
        code=code_of("infogain_cell.py"),
        supervisor=lambda w: INFOGAIN_TRACES["supervisor"],
        seed=lambda w: INFOGAIN_TRACES.get("seed", 0),
        segmentation=lambda w: PROTOCOLS[IG_VARIANT]["segmentation"],
        cap=lambda w: PROTOCOLS[IG_VARIANT]["cap"],
    script:
        "../scripts/infogain_cell.py"


rule infogain_tables:
    input:
        aggregate=expand(f"{IG_DIR}/{{cell}}/aggregate.csv", cell=CELLS),
        detection=expand(f"{IG_DIR}/{{cell}}/detection.csv", cell=CELLS),
        summary=expand(f"{IG_DIR}/{{cell}}/summary.json", cell=CELLS),
    output:
        ig=report(
            f"{IG_DIR}/ig_table.csv",
            caption="../report/infogain_traces_ig.rst",
            category="6. Information gain",
            labels={"output": "IG per step, own traces"},
        ),
        detection=report(
            f"{IG_DIR}/detection_table.csv",
            caption="../report/infogain_traces_detection.rst",
            category="6. Information gain",
            labels={"output": "detection, own traces"},
        ),
    log:
        f"{STUDY_DIR}/logs/infogain_tables.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/infogain_tables.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("infogain_tables.py"),
        cells=CELLS,
    script:
        "../scripts/infogain_tables.py"


# `snakemake --cores 2 infogain_traces --configfile <config with infogain.traces>`
rule infogain_traces:
    input:
        infogain_trace_targets(),
