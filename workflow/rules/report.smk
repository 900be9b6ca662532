# The study report: `snakemake --report report.html --configfile <study config>` (docs/reference.md section 7).
# The header (plan hash, deviations, scope, integrity) is shown first, then the Registered results
# page; every other output is flagged with report() in the rule that produces it. Both pages follow
# the study manifest and the audit, so they live under report/, outside the manifest.


report: "../report/workflow.rst"


# Building the report runs no rule, so the stored files are checked against the manifest here: a
# report over outputs that no longer match says so on its pages and on the console. The command
# line is read because Snakemake (9.27) sets nothing on `workflow` before create_report runs (no public
# API tells a Snakefile it is read for a report: docs/developer-notes.md).
if any(arg == "--report" or arg.startswith("--report=") for arg in sys.argv):
    from snakemake.logging import logger
    from cotdyn.report.csp import UnguardedPageError, refuse_unguarded
    from cotdyn.report.pages import refresh_for_report

    _report_warning = refresh_for_report(STUDY_DIR, VARIANTS)
    # report.html embeds each page as it stands (an iframe of a data URL, no sandbox): a page
    # without cotdyn's Content-Security-Policy first in its head is refused (cotdyn.report.csp)
    try:
        refuse_unguarded(STUDY_DIR)
    except UnguardedPageError as e:
        raise WorkflowError(str(e)) from None
    if _report_warning:
        logger.warning(_report_warning)


# The audit as the report shows it: unlike rule audit it does not fail, it records the result.
rule audit_result:
    input:
        manifest=f"{STUDY_DIR}/{STUDY_MANIFEST}",
        plan=PLAN_PATH,
    output:
        f"{STUDY_DIR}/{layout.AUDIT_RESULT}",
    log:
        f"{STUDY_DIR}/logs/report/audit.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("audit_result.py"),
        study_dir=lambda w, input: str(Path(input.manifest).parents[1]),
        cache=CACHE_DIR,
    script:
        "../scripts/audit_result.py"


rule report_header:
    input:
        hypotheses=f"{STUDY_DIR}/analysis/{{variant}}/hypotheses.json",
        plan_check=f"{STUDY_DIR}/{PLAN_CHECK}",
        audit=f"{STUDY_DIR}/{layout.AUDIT_RESULT}",
    output:
        report(
            f"{STUDY_DIR}/{layout.report_page('{variant}', 'header.html')}",
            caption="../report/header.rst",
            category="0. Study header",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "header"},
        ),
    log:
        f"{STUDY_DIR}/logs/report_header/{{variant}}.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("report_header.py"),
        plan_sha256=PLAN_SHA256,
        study_dir=lambda w, input: str(Path(input.hypotheses).parents[2]),
    script:
        "../scripts/report_header.py"


rule registered_results:
    input:
        hypotheses=f"{STUDY_DIR}/analysis/{{variant}}/hypotheses.json",
        audit=f"{STUDY_DIR}/{layout.AUDIT_RESULT}",
    output:
        report(
            f"{STUDY_DIR}/{layout.report_page('{variant}', 'registered_results.html')}",
            caption="../report/registered_results.rst",
            category="1. Registered analysis",
            subcategory="{variant}",
            # "0." sorts the page before the analysis files, whose labels are their names
            labels={"variant": "{variant}", "output": "0. registered results"},
        ),
    log:
        f"{STUDY_DIR}/logs/registered_results/{{variant}}.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("registered_results.py"),
        study_dir=lambda w, input: str(Path(input.hypotheses).parents[2]),
    script:
        "../scripts/registered_results.py"


# The per-sample browser (cotdyn.report.sample_browser): per chain of each cell, its prefixes,
# continuations, answers and entropies, bounded in size; the audit re-derives it from the raw files.
rule sample_browser:
    input:
        chains=lambda w: [chains_path(c, w.variant) for c in CELLS],
        samples=lambda w: [samples_path(c, w.variant) for c in CELLS],
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        problems=[f"{STUDY_DIR}/problems/{CELL_SPECS[c].benchmark_key}.parquet" for c in CELLS],
    output:
        report(
            f"{STUDY_DIR}/{layout.sample_page('{variant}')}",
            caption="../report/sample_browser.rst",
            # beside the grading page, the other look at the samples (a section of its own would sit
            # after the optional information gain, which the sections' numbering keeps last)
            category="5. Grading",
            subcategory="sample browser",
            labels={"variant": "{variant}", "output": "sample browser"},
        ),
    log:
        f"{STUDY_DIR}/logs/sample_browser/{{variant}}.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("sample_browser.py"),
        cells=CELLS,
        protocol=lambda w: PROTOCOLS[w.variant],
        samples_files=lambda w: [
            layout.variant_file(c, samples_variant(config, w.variant), "samples.jsonl") for c in CELLS
        ],
    script:
        "../scripts/sample_browser.py"
