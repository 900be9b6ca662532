# The grading page (cotdyn.report.grading; docs/reference.md section 4): per cell, the parse statuses,
# every pair the registered rule and math-verify grade differently, and a fixed-seed sample of
# graded texts, as CSV and on one HTML page of the report. It reads the reference chains and the
# registered variant's samples (the first variant when none is named registered), so it is written
# beside the report's pages, outside the manifest.

GRADING_VARIANT = "registered" if "registered" in VARIANTS else VARIANTS[0]


rule grading:
    input:
        chains=lambda w: chains_path(w.cell, GRADING_VARIANT),
        samples=lambda w: samples_path(w.cell, GRADING_VARIANT),
        problems=lambda w: f"{STUDY_DIR}/problems/{CELL_SPECS[w.cell].benchmark_key}.parquet",
    output:
        tables=[
            report(
                f"{STUDY_DIR}/{layout.grading_file('{cell}', name)}",
                caption=f"../report/grading_{name.replace('.', '_')}.rst",
                category="5. Grading",
                subcategory="{cell}",
                labels={"cell": "{cell}", "output": name.rsplit(".", 1)[0]},
            )
            for name in layout.GRADING_FILES
        ],
    log:
        f"{STUDY_DIR}/logs/grading/{{cell}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/grading/{{cell}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("grading.py"),
        benchmark=lambda w: CELL_SPECS[w.cell].answer_rule,
        # the variant's form of an answer class (plan v4: canonical; v1-v3: as_written)
        answer_form=PROTOCOLS[GRADING_VARIANT]["answer_form"],
    script:
        "../scripts/grading.py"


rule grading_page:
    input:
        tables=expand(f"{STUDY_DIR}/{layout.grading_file('{cell}', '{name}')}", cell=CELLS, name=layout.GRADING_FILES),
    output:
        report(
            f"{STUDY_DIR}/{layout.GRADING_PAGE}",
            caption="../report/grading_html.rst",
            category="5. Grading",
            subcategory="all cells",
            labels={"cell": "all", "output": "grading page"},
        ),
    log:
        f"{STUDY_DIR}/logs/grading/page.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("grading_page.py"),
        cells=CELLS,
        folders=[f"{STUDY_DIR}/{layout.grading_file(c, '')}" for c in CELLS],
        variant=GRADING_VARIANT,
    script:
        "../scripts/grading_page.py"
