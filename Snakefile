# cotdyn: chain-of-thought answer-entropy trajectories (docs/design.md). Stages live in workflow/rules/.
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
include: "workflow/rules/dynamics_interventions.smk"
include: "workflow/rules/exploratory.smk"
include: "workflow/rules/secondary.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/grading.smk"
include: "workflow/rules/infogain.smk"


rule all:
    input:
        study_targets(),
        f"{STUDY_DIR}/{STUDY_MANIFEST}",
        report_targets(),
    default_target: True
