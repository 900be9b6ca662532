rule problems:
    input:
        # the benchmark's own file, when it has one: an edited file rebuilds its problems
        data=lambda w: [
            c.benchmark["path"]
            for c in CELL_SPECS.values()
            if c.benchmark_key == w.benchmark and c.benchmark.get("path")
        ][:1],
    output:
        f"{STUDY_DIR}/problems/{{benchmark}}.parquet",
    log:
        f"{STUDY_DIR}/logs/problems/{{benchmark}}.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("problems.py"),
        spec=lambda w: next(c.benchmark for c in CELL_SPECS.values() if c.benchmark_key == w.benchmark),
    script:
        "../scripts/problems.py"
