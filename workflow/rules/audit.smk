# Preregistration, provenance and audit (DESIGN section 7).
# check_plan heads the DAG: an edited plan or an undeclared deviation of a confirmatory cell stops
# the run before any generation. hypotheses, manifest and audit close it.
from cotdyn.audit import PLAN_CHECK
from cotdyn.preregistration import sibling_paths
from cotdyn.provenance import STUDY_MANIFEST

ANALYSIS_FILES = ["hypotheses.json", "panel_table.csv", "h2_table.csv", "h3_buckets.csv", "h4_table.csv",
                  "h5_table.csv", "holm_table.csv", "forest_gaps.png"]


def preregistration_inputs(wildcards):
    """plan.yaml, REGISTERED and (when present) deviations.yaml: a change to any re-runs the check."""
    registered, deviations = sibling_paths(PLAN_PATH)
    return [PLAN_PATH, str(registered)] + ([str(deviations)] if deviations.exists() else [])


def generation_logs(cell):
    logs = {v: f"{STUDY_DIR}/cells/{cell}/{v}/generation.json" for v in VARIANTS}
    for v in VARIANTS:
        ref = Path(chains_path(cell, v)).parent
        logs[f"reference/{ref.name}"] = str(ref / "generation.json")
    return logs


rule check_plan:
    input:
        preregistration_inputs,
    output:
        f"{STUDY_DIR}/{PLAN_CHECK}",
    params:
        plan=PLAN_PATH,
        config=config,
    log:
        f"{STUDY_DIR}/logs/check_plan.log",
    script:
        "../scripts/check_plan.py"


rule hypotheses:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        plan_check=f"{STUDY_DIR}/{PLAN_CHECK}",
        plan=PLAN_PATH,
    output:
        [f"{STUDY_DIR}/analysis/{{variant}}/{name}" for name in ANALYSIS_FILES],
    params:
        plan=PLAN_PATH,
    log:
        f"{STUDY_DIR}/logs/hypotheses/{{variant}}.log",
    script:
        "../scripts/hypotheses.py"


rule cell_manifest:
    input:
        unpack(lambda w: {"problems": f"{STUDY_DIR}/problems/{CELL_SPECS[w.cell].benchmark_key}.parquet",
                          "plan_check": f"{STUDY_DIR}/{PLAN_CHECK}",
                          **{f"gen_{i}": p for i, p in enumerate(generation_logs(w.cell).values())}}),
    output:
        f"{STUDY_DIR}/manifest/cells/{{cell}}.json",
    params:
        spec=lambda w: CELL_SPECS[w.cell],
        protocols=PROTOCOLS,
        generation=lambda w: generation_logs(w.cell),
        plan=PLAN_PATH,
        config=config,
    log:
        f"{STUDY_DIR}/logs/manifest/{{cell}}.log",
    script:
        "../scripts/cell_manifest.py"


# Every output of the study is an input, so the study manifest hashes a finished study.
rule manifest:
    input:
        cells=expand(f"{STUDY_DIR}/manifest/cells/{{cell}}.json", cell=CELLS),
        analysis=expand(f"{STUDY_DIR}/analysis/{{variant}}/{{name}}", variant=VARIANTS, name=ANALYSIS_FILES),
        summaries=expand(f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/summary.json", cell=CELLS, variant=VARIANTS),
    output:
        f"{STUDY_DIR}/{STUDY_MANIFEST}",
    params:
        study_dir=STUDY_DIR,
        study=config["study"],
        plan=PLAN_PATH,
        config=config,
    log:
        f"{STUDY_DIR}/logs/manifest/study.log",
    script:
        "../scripts/manifest.py"


# `snakemake audit --configfile <the study's config>`: re-derive and compare; fails on any mismatch.
# No inputs on purpose: a tampered file must not trigger a re-run that would launder it into a
# fresh manifest. No outputs, so it runs every time it is asked for; the report goes to the log.
rule audit:
    params:
        study_dir=STUDY_DIR,
        plan=PLAN_PATH,
        report=f"{STUDY_DIR}/logs/audit/audit.json",
    log:
        f"{STUDY_DIR}/logs/audit/audit.log",
    script:
        "../scripts/audit.py"
