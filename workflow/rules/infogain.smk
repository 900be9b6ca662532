# Step information gain (seed 000): the toy experiment with five synthetic LLMs, a supervisor and an
# ORM per LLM, Math-Shepherd with the generator as completer (docs/design.md section 9). CPU only.
# config["infogain"]: size ("reduced" | "full" | a dict of overrides, see cotdyn.infogain.PRESETS)
# and seed (int).
rule infogain_toy:
    output:
        summary="results/{study}/infogain/toy/ig_summary.csv",
        orm="results/{study}/infogain/toy/orm_summary.csv",
        ms="results/{study}/infogain/toy/ms_summary.csv",
        subtask="results/{study}/infogain/toy/subtask_ig.csv",
        detection="results/{study}/infogain/toy/detection.csv",
        table1=report(
            "results/{study}/infogain/toy/table1_llm3.csv",
            caption="../report/infogain_table1.rst",
            category="5. Information gain",
            labels={"output": "LLM3 detection (Table 1)"},
        ),
        samplewise="results/{study}/infogain/toy/samplewise.csv",
        training="results/{study}/infogain/toy/training_history.csv",
        acceptance="results/{study}/infogain/toy/acceptance.json",
        figure3=report(
            "results/{study}/infogain/toy/figure3_heatmaps.png",
            caption="../report/infogain_figure3.rst",
            category="5. Information gain",
            labels={"output": "Figure 3 heatmaps"},
        ),
        ig_figure="results/{study}/infogain/toy/ig_heatmaps.png",
    params:
        size=lambda wildcards: config["infogain"]["size"],
        seed=lambda wildcards: config["infogain"]["seed"],
    wildcard_constraints:
        study="[A-Za-z0-9_.-]+",
    threads: 2
    conda:
        "../../envs/generate-cpu.yaml"
    log:
        "results/{study}/logs/infogain_toy.log",
    script:
        "../scripts/infogain_toy.py"


# `snakemake --cores 2 infogain [--config 'infogain={size: full, seed: 0}']`: the toy experiment
# for this study (reduced size by default; full size takes about 40 minutes on 2 cores).
rule infogain:
    input:
        f"{STUDY_DIR}/infogain/toy/ig_summary.csv",


# Math-Shepherd labels of the study's own traces, from the continuations already drawn (seed 000).
rule math_shepherd:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        samples=lambda w: [samples_path(cell, w.variant) for cell in CELLS],
        chains=lambda w: [chains_path(cell, w.variant) for cell in CELLS],
    output:
        f"{STUDY_DIR}/analysis/{{variant}}/math_shepherd.csv",
    params:
        cells=CELLS,
        benchmarks=[CELL_SPECS[c].answer_rule for c in CELLS],
        protocol=lambda w: PROTOCOLS[w.variant],
    conda:
        "../../envs/analysis.yaml"
    log:
        f"{STUDY_DIR}/logs/math_shepherd/{{variant}}.log",
    script:
        "../scripts/math_shepherd.py"
