# cotdyn: chain-of-thought answer-entropy trajectories (DESIGN.md). Stages live in workflow/rules/.
from snakemake.utils import min_version

min_version("9.0")


# The embedded default, unless a config was given (--configfile replaces it, never merges with it).
if not config:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/problems.smk"
include: "workflow/rules/generate.smk"
include: "workflow/rules/trajectories.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/dynamics.smk"
include: "workflow/rules/exploratory.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/infogain.smk"


rule all:
    input:
        summaries=expand(f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/summary.json", cell=CELLS, variant=VARIANTS),
        manifest=f"{STUDY_DIR}/manifest/manifest.json",
        dynamics=expand(f"{STUDY_DIR}/analysis/{{variant}}/dynamics/profiles.csv", variant=VARIANTS),
        exploratory=expand(f"{STUDY_DIR}/analysis/{{variant}}/exploratory/tables.html", variant=VARIANTS),
        header=expand(f"{STUDY_DIR}/analysis/{{variant}}/report_header.html", variant=VARIANTS),
        sweeps=f"{STUDY_DIR}/analysis/sweeps.csv",
        math_shepherd=expand(f"{STUDY_DIR}/analysis/{{variant}}/math_shepherd.csv", variant=VARIANTS),
    default_target: True
