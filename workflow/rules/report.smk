# The study report: `snakemake --report report.html --configfile <study config>` (docs/design.md section 7).
# The header names the plan hash and the declared deviations and is shown first; every other
# output is flagged with report() in the rule that produces it.

report: "../report/workflow.rst"


rule report_header:
    input:
        hypotheses=f"{STUDY_DIR}/analysis/{{variant}}/hypotheses.json",
        plan_check=f"{STUDY_DIR}/{PLAN_CHECK}",
    output:
        report(
            f"{STUDY_DIR}/analysis/{{variant}}/report_header.html",
            caption="../report/header.rst",
            category="0. Study header",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "header"},
        ),
    params:
        plan_sha256=PLAN_SHA256,
    conda:
        "../../envs/analysis.yaml"
    log:
        f"{STUDY_DIR}/logs/report_header/{{variant}}.log",
    script:
        "../scripts/report_header.py"
