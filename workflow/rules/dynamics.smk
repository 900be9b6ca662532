# Answer-distribution trajectories and dynamical profiles (seed 002), over every cell of a variant.


rule dynamics:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        samples=lambda w: [samples_path(cell, w.variant) for cell in CELLS],
        chains=lambda w: [chains_path(cell, w.variant) for cell in CELLS],
    output:
        profiles=f"{STUDY_DIR}/analysis/{{variant}}/dynamics/profiles.csv",
        shares=f"{STUDY_DIR}/analysis/{{variant}}/dynamics/mechanism_shares.csv",
        variance=f"{STUDY_DIR}/analysis/{{variant}}/dynamics/variance_decomposition.csv",
        trajectories=f"{STUDY_DIR}/analysis/{{variant}}/dynamics/trajectories.png",
    params:
        cells=CELLS,
    conda:
        "../../envs/analysis.yaml"
    log:
        f"{STUDY_DIR}/logs/dynamics/{{variant}}.log",
    script:
        "../scripts/dynamics.py"
