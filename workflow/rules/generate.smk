# Generation, per cell: every reference chain in one batched phase, then every (problem, prefix)
# continuation in another. Both go through the content-addressed cache in CACHE_DIR.


rule prepare_model:
    output:
        "results/models/{model}/SOURCE",
    log:
        "results/logs/prepare_model/{model}.log",
    benchmark:
        "results/logs/benchmarks/prepare_model/{model}.tsv"
    conda:
        "../../envs/generate-cpu.yaml"
    params:
        code=code_of("prepare_model.py"),
        gguf=lambda w: params.conversion_for(config, w.model)["gguf"],
    script:
        "../scripts/prepare_model.py"


rule reference:
    input:
        problems=lambda w: f"{STUDY_DIR}/problems/{CELL_SPECS[w.cell].benchmark_key}.parquet",
        model=model_inputs,
    output:
        chains=f"{STUDY_DIR}/cells/{{cell}}/reference/{{ref}}/chains.parquet",
        generation=f"{STUDY_DIR}/cells/{{cell}}/reference/{{ref}}/generation.json",
        seal=f"{STUDY_DIR}/cells/{{cell}}/reference/{{ref}}/seal.json",
    log:
        f"{STUDY_DIR}/logs/reference/{{cell}}/{{ref}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/reference/{{cell}}/{{ref}}.tsv"
    conda:
        generation_env
    threads: 2
    resources:
        **generation_resources("reference"),
    params:
        code=code_of("reference.py"),
        model=lambda w: model_for(w.cell),
        model_key=lambda w: CELL_SPECS[w.cell].model_key,
        protocol=lambda w: REFERENCES[w.ref],
        benchmark=lambda w: CELL_SPECS[w.cell].answer_rule,
        cache=CACHE_DIR,
    script:
        "../scripts/reference.py"


rule continuations:
    input:
        problems=lambda w: f"{STUDY_DIR}/problems/{CELL_SPECS[w.cell].benchmark_key}.parquet",
        chains=lambda w: chains_path(w.cell, w.variant),
        chains_seal=lambda w: str(seal_path(chains_file(w.cell, w.variant))),
        model=model_inputs,
    output:
        samples=f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/samples.parquet",
        generation=f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/generation.json",
        seal=f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/seal.json",
    log:
        f"{STUDY_DIR}/logs/continuations/{{cell}}/{{variant}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/continuations/{{cell}}/{{variant}}.tsv"
    conda:
        generation_env
    threads: 2
    resources:
        **generation_resources("continuations"),
    params:
        code=code_of("continuations.py"),
        model=lambda w: model_for(w.cell),
        model_key=lambda w: CELL_SPECS[w.cell].model_key,
        protocol=lambda w: PROTOCOLS[w.variant],
        benchmark=lambda w: CELL_SPECS[w.cell].answer_rule,
        cache=CACHE_DIR,
    script:
        "../scripts/continuations.py"


# The samples as JSON lines beside the parquet (cotdyn.records.export): byte for byte a function of
# the sealed parquet, which the audit re-derives. Only a generating variant has samples of its own
# (samples_jsonl_files, common.smk).
rule samples_jsonl:
    input:
        samples=lambda w: samples_path(w.cell, w.variant),
        seal=lambda w: str(seal_path(samples_file(w.cell, w.variant))),
    output:
        jsonl=f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/samples.jsonl",
    log:
        f"{STUDY_DIR}/logs/samples_jsonl/{{cell}}/{{variant}}.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("samples_jsonl.py"),
    script:
        "../scripts/samples_jsonl.py"
