# Exploratory analyses and sensitivity sweeps (docs/reference.md section 6; seed 003 sections 5-6, Appendix F).
# Outside the registration: computed from stored records only, and reported against the registered cell.
from cotdyn.report.exploratory_tables import FIGURES as EXPLORATORY_FIGURES, TABLES as EXPLORATORY_TABLES, TABLES_HTML


rule exploratory:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        plan=PLAN_PATH,
    output:
        tables=[exploratory_item(f"{t}.csv", "table") for t in EXPLORATORY_TABLES],
        html=exploratory_item(TABLES_HTML, "tables"),
        figures=[exploratory_item(f, "figure") for f in EXPLORATORY_FIGURES],
    log:
        f"{STUDY_DIR}/logs/exploratory/{{variant}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/exploratory/{{variant}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("exploratory.py"),
        m=lambda w: PROTOCOLS[w.variant]["m"],
        epsilon=lambda w: PROTOCOLS[w.variant]["epsilon"],
        seed=PLAN["analysis"]["bootstrap"]["seed"],
        resamples=PLAN["analysis"]["bootstrap"]["resamples"],
        level=PLAN["analysis"]["bootstrap"]["level"],
        plan_sha256=PLAN_SHA256,
        signals=caption_list(study_signals(config.get("signals", []))),  # read by the captions
    script:
        "../scripts/exploratory.py"


rule sweeps:
    input:
        summaries=expand(f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/summary.json", cell=CELLS, variant=VARIANTS),
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{variant}}/records.parquet", cell=CELLS, variant=VARIANTS),
    output:
        csv=report(
            f"{STUDY_DIR}/analysis/sweeps.csv",
            caption="../report/sweeps.rst",
            category="3. Sensitivity sweeps",
            labels={"output": "sweeps", "format": "csv"},
        ),
        html=report(
            f"{STUDY_DIR}/analysis/sweeps.html",
            caption="../report/sweeps.rst",
            category="3. Sensitivity sweeps",
            labels={"output": "sweeps", "format": "html"},
        ),
    log:
        f"{STUDY_DIR}/logs/sweeps.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/sweeps.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("sweeps.py"),
        cells=CELLS,
        variants=VARIANTS,
        registered="registered",
        seed=PLAN["analysis"]["bootstrap"]["seed"],
        resamples=PLAN["analysis"]["bootstrap"]["resamples"],
        level=PLAN["analysis"]["bootstrap"]["level"],
        plan_sha256=PLAN_SHA256,
    script:
        "../scripts/sweeps.py"
