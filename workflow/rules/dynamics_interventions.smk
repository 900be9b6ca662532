# Seed 002 Figure 4: training and inference interventions, over the variants that the config's
# dynamics_comparisons names (cotdyn.methods.dynamics_interventions).
from cotdyn.methods.dynamics_interventions import comparison_variants

if config.get("dynamics_comparisons"):
    try:
        COMPARISON_VARIANTS = comparison_variants(config["dynamics_comparisons"], VARIANTS)
    except ValueError as e:
        raise WorkflowError(f"{CONFIG_SOURCE}: {e}") from None

    rule dynamics_interventions:
        input:
            profiles=[f"{STUDY_DIR}/analysis/{v}/dynamics/profiles.csv" for v in COMPARISON_VARIANTS],
        output:
            conditions=f"{STUDY_DIR}/{layout.INTERVENTION_FILES[0]}",
            changes=report(
                f"{STUDY_DIR}/{layout.INTERVENTION_FILES[1]}",
                caption="../report/dynamics_interventions.rst",
                category="4. Dynamics",
                subcategory="interventions",
                labels={"output": "changes"},
            ),
            effects=report(
                f"{STUDY_DIR}/{layout.INTERVENTION_FILES[2]}",
                caption="../report/dynamics_interventions.rst",
                category="4. Dynamics",
                subcategory="interventions",
                labels={"output": "effects"},
            ),
            figure=report(
                f"{STUDY_DIR}/{layout.INTERVENTION_FILES[3]}",
                caption="../report/dynamics_interventions.rst",
                category="4. Dynamics",
                subcategory="interventions",
                labels={"output": "figure4"},
            ),
        log:
            f"{STUDY_DIR}/logs/dynamics_interventions.log",
        benchmark:
            f"{STUDY_DIR}/logs/benchmarks/dynamics_interventions.tsv"
        conda:
            "../../envs/analysis.yaml"
        params:
            code=code_of("dynamics_interventions.py"),
            variants=COMPARISON_VARIANTS,
            comparisons=config["dynamics_comparisons"],
            plan_sha256=PLAN_SHA256,
        script:
            "../scripts/dynamics_interventions.py"
