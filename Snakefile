# cotdyn: chain-of-thought answer-entropy trajectories (docs/design.md). Stages live in workflow/rules/.
from snakemake.utils import min_version

min_version("9.0")


# The embedded default, unless a --configfile was given (it replaces the default, never merges with
# it); --config alone overrides keys of the default by Snakemake's own rules (it is applied last).
if not workflow.overwrite_configfiles:

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


# Run by the main process, not submitted, on a cluster: each takes seconds and little memory (the plan
# check, the problem tables, the manifests, the audit and the report pages), less than the two
# Snakemake start-ups a SLURM job costs; the problem tables may download from the hub, which a login
# node reaches where compute nodes often do not (docs/cluster.md).
localrules:
    check_plan,
    problems,
    cell_manifest,
    manifest,
    audit_result,
    report_header,
    registered_results,
    grading_page,


rule all:
    default_target: True
    input:
        study_targets(),
        f"{STUDY_DIR}/{STUDY_MANIFEST}",
        report_targets(),
