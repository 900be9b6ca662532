# Preregistration, provenance and audit (docs/reference.md section 7).
# check_plan heads the DAG: an edited plan or an undeclared deviation of a confirmatory cell stops
# the run before any generation. hypotheses, manifest and audit close it.


rule check_plan:
    input:
        preregistration_inputs,
    output:
        f"{STUDY_DIR}/{PLAN_CHECK}",
    log:
        f"{STUDY_DIR}/logs/check_plan.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("check_plan.py"),
        plan=PLAN_PATH,
        config=PLAN_CHECK_CONFIG,
    script:
        "../scripts/check_plan.py"


rule hypotheses:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        plan_check=f"{STUDY_DIR}/{PLAN_CHECK}",
        plan=PLAN_PATH,
    output:
        [
            report(
                f"{STUDY_DIR}/analysis/{{variant}}/{name}",
                caption=f"../report/{name.replace('.json', '_json').rsplit('.', 1)[0]}.rst",
                category="1. Registered analysis",
                subcategory="{variant}",
                labels={"variant": "{variant}", "output": name.rsplit(".", 1)[0]},
            )
            for name in ANALYSIS_FILES
        ],
    log:
        f"{STUDY_DIR}/logs/hypotheses/{{variant}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/hypotheses/{{variant}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("hypotheses.py"),
        plan_sha256=PLAN_SHA256,
    script:
        "../scripts/hypotheses.py"


rule cell_manifest:
    input:
        unpack(
            lambda w: {
                "problems": f"{STUDY_DIR}/problems/{CELL_SPECS[w.cell].benchmark_key}.parquet",
                "plan_check": f"{STUDY_DIR}/{PLAN_CHECK}",
                **{f"gen_{i}": p for i, p in enumerate(generation_logs(w.cell).values())},
            }
        ),
    output:
        f"{STUDY_DIR}/manifest/cells/{{cell}}.json",
    log:
        f"{STUDY_DIR}/logs/manifest/{{cell}}.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("cell_manifest.py"),
        spec=lambda w: CELL_SPECS[w.cell],
        protocols=PROTOCOLS,
        generation=lambda w: generation_logs(w.cell),
        plan=PLAN_PATH,
        config=config,
    script:
        "../scripts/cell_manifest.py"


# Every output of the study is an input, so the study manifest hashes a finished study.
rule manifest:
    input:
        study_targets(),
        samples_jsonl_files(),
    output:
        f"{STUDY_DIR}/{STUDY_MANIFEST}",
    log:
        f"{STUDY_DIR}/logs/manifest/study.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("manifest.py"),
        study_dir=lambda w, output: str(Path(output[0]).parents[1]),
        study=config["study"],
        plan=PLAN_PATH,
        config=config,
    script:
        "../scripts/manifest.py"


# `snakemake audit --configfile <the study's config>`: re-derive and compare; fails on any mismatch.
# No inputs on purpose: a tampered file must not trigger a re-run that would launder it into a
# fresh manifest. No outputs, so it runs every time it is asked for; the report goes to the log.
rule audit:
    log:
        f"{STUDY_DIR}/logs/audit/audit.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("audit.py"),
        study_dir=STUDY_DIR,
        plan=PLAN_PATH,
        cache=CACHE_DIR,
        report=f"{STUDY_DIR}/logs/audit/audit.json",
    script:
        "../scripts/audit.py"
