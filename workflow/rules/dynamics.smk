# Answer-distribution trajectories and dynamical profiles (seed 002), over every cell of a variant.


rule dynamics:
    input:
        records=expand(f"{STUDY_DIR}/cells/{{cell}}/{{{{variant}}}}/records.parquet", cell=CELLS),
        samples=lambda w: [samples_path(cell, w.variant) for cell in CELLS],
        chains=lambda w: [chains_path(cell, w.variant) for cell in CELLS],
    output:
        profiles=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/profiles.csv",
            caption="../report/dynamics_profiles.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "profiles"},
        ),
        shares=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/mechanism_shares.csv",
            caption="../report/dynamics_mechanism_shares.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "shares"},
        ),
        variance=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/variance_decomposition.csv",
            caption="../report/dynamics_variance.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "variance"},
        ),
        trajectories=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/trajectories.png",
            caption="../report/dynamics_trajectories.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "trajectories"},
        ),
        shares_figure=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/mechanism_shares.png",
            caption="../report/dynamics_mechanism_shares.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "shares_figure"},
        ),
        objective=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/objective_profiles.csv",
            caption="../report/dynamics_objective_profiles.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "objective_profiles"},
        ),
        disagreement_pairs=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/disagreement_pairs.csv",
            caption="../report/dynamics_disagreement.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "disagreement_pairs"},
        ),
        disagreement_curve=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/disagreement_curve.csv",
            caption="../report/dynamics_disagreement.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "disagreement_curve"},
        ),
        disagreement_figure=report(
            f"{STUDY_DIR}/analysis/{{variant}}/dynamics/disagreement.png",
            caption="../report/dynamics_disagreement.rst",
            category="4. Dynamics",
            subcategory="{variant}",
            labels={"variant": "{variant}", "output": "disagreement_figure"},
        ),
    log:
        f"{STUDY_DIR}/logs/dynamics/{{variant}}.log",
    benchmark:
        f"{STUDY_DIR}/logs/benchmarks/dynamics/{{variant}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        code=code_of("dynamics.py"),
        cells=CELLS,
        benchmarks=[CELL_SPECS[c].answer_rule for c in CELLS],
        protocol=lambda w: PROTOCOLS[w.variant],
        plan_sha256=PLAN_SHA256,
    script:
        "../scripts/dynamics.py"
