"""The files a study's DAG writes for its config: what the audit expects, from the config, not the manifest.

The manifest lists what its writer chose to list; a forger who deletes a raw file's entry would
have the audit skip it. So the audit computes, from the manifest's config (admitted and
schema-checked, cotdyn.audit.untrusted) and the plan, every file the workflow's rules write for
that config (``expected_files``: the raw files, their seals and generation logs, records and
summaries, the plan check, problem tables, cell manifests, every analysis output), and compares it
with the study and its manifest (``expected_checks``): an expected file absent from the study or
from the manifest fails, and so does a file in a folder the DAG alone writes (``VOUCHED``) that
no rule writes for this config ("extra"). The logs and the report pages (cotdyn.audit.pages) are
not in the manifest and not compared here. ``infogain/`` is not vouched for: a study made before the
seed-000 toy experiment was removed may hold its ``infogain/toy/`` (never in a manifest), so only the
traces files a config asks for are expected there.

``tests/test_expected_files.py`` checks this set against the outputs of every job of the
workflow's own DAG (``snakemake -n --forceall``) for configs that plan every optional rule.
"""

from __future__ import annotations

from cotdyn.audit.raw import raw_files
from cotdyn.files.layout import (
    ANALYSIS_FILES,
    DYNAMICS_FILES,
    GENERATIONS,
    INFOGAIN_TRACE_FILES,
    INTERVENTION_FILES,
    PLAN_CHECK,
    SECONDARY,
    STUDY_MANIFEST,
    SWEEPS,
    analysis_file,
    cell_manifest,
    problems,
    study_extras,
    variant_file,
)
from cotdyn.provenance.integrity import EXTRA, MISSING, UNLISTED, FileCheck
from cotdyn.report.exploratory_tables import FIGURES as EXPLORATORY_FIGURES
from cotdyn.report.exploratory_tables import TABLES as EXPLORATORY_TABLES
from cotdyn.report.exploratory_tables import TABLES_HTML as EXPLORATORY_HTML
from cotdyn.report.secondary_tables import GENERATION_TABLES, has_secondary
from cotdyn.report.secondary_tables import TABLES as SECONDARY_TABLES

# The folders only the DAG writes into: a file there that no rule writes for the config fails.
VOUCHED = ("cells/", "analysis/", "checks/", "manifest/", "problems/")
# Seed 000 on the study's own traces (workflow/rules/infogain.smk): per cell, and per benchmark.
INFOGAIN_TRACES = "infogain/traces"
INFOGAIN_CELL_FILES = ("steps.csv", "aggregate.csv", "detection.csv", "training_history.csv", "summary.json")


def _phase_files(raw: str, rule: str) -> dict[str, str]:
    """A raw file, its seal and its phase's generation log, written together by ``rule``."""
    folder = raw.rsplit("/", 1)[0]
    return {raw: rule, f"{folder}/seal.json": rule, f"{folder}/generation.json": rule}


def _variant_analysis(variant: str, extras: frozenset[str], secondary: bool) -> dict[str, str]:
    """The analysis outputs of one variant over all cells, by the rule that writes each; ``extras``
    the config's (cotdyn.files.layout.study_extras), ``secondary`` whether the plan and the config
    both ask for seed 003's further analyses."""
    files = {analysis_file(variant, name): "hypotheses" for name in ANALYSIS_FILES}
    if "dynamics" in extras:
        files |= {analysis_file(variant, f"dynamics/{name}"): "dynamics" for name in DYNAMICS_FILES}
    if "exploratory" in extras:
        exploratory = [*(f"{t}.csv" for t in EXPLORATORY_TABLES), EXPLORATORY_HTML, *EXPLORATORY_FIGURES]
        files |= {analysis_file(variant, f"exploratory/{name}"): "exploratory" for name in exploratory}
    if "math_shepherd" in extras:
        files[analysis_file(variant, "math_shepherd.csv")] = "math_shepherd"
    if secondary:
        folder = SECONDARY.rsplit("/", 1)[0]
        files |= {analysis_file(variant, f"{folder}/{t}.csv"): "secondary" for t in SECONDARY_TABLES}
        files[analysis_file(variant, SECONDARY)] = "secondary"
    return files


def expected_files(config: dict, plan: dict, cells: dict, protocols: dict[str, dict]) -> dict[str, str]:
    """Every file (relative to the study folder) the workflow's DAG writes for ``config`` under
    ``plan`` -> the rule that writes it, logs and report pages aside. ``cells``: the config's
    cells (cotdyn.plan.config.resolve_cells); ``protocols``: each variant's protocol."""
    files = {PLAN_CHECK: "check_plan", STUDY_MANIFEST: "manifest"}
    files |= {problems(b): "problems" for b in sorted({spec.benchmark_key for spec in cells.values()})}
    for raw, (_, _, chains) in raw_files(config, protocols, cells).items():
        files |= _phase_files(raw, "reference" if chains is None else "continuations")
        if chains is not None:  # the samples as JSON lines beside them (cotdyn.records.export)
            files[raw.removesuffix(".parquet") + ".jsonl"] = "samples_jsonl"
    for cell in cells:
        files[cell_manifest(cell)] = "cell_manifest"
        for variant in protocols:
            files |= {variant_file(cell, variant, name): "records" for name in ("records.parquet", "summary.json")}
    extras = study_extras(config)
    secondary = has_secondary(plan) and "secondary" in extras
    for variant in protocols:
        files |= _variant_analysis(variant, extras, secondary)
    if "sweeps" in extras:
        files |= {path: "sweeps" for path in SWEEPS}
    if secondary:
        files |= {f"{GENERATIONS.rsplit('/', 1)[0]}/{t}.csv": "generations" for t in GENERATION_TABLES}
        files[GENERATIONS] = "generations"
    if config.get("dynamics_comparisons"):
        files |= {path: "dynamics_interventions" for path in INTERVENTION_FILES}
    if config.get("infogain", {}).get("traces"):
        benchmarks = sorted({spec.benchmark_key for spec in cells.values()})
        files |= {f"{INFOGAIN_TRACES}/split/{b}.csv": "infogain_split" for b in benchmarks}
        files |= {f"{INFOGAIN_TRACES}/{c}/{name}": "infogain_cell" for c in cells for name in INFOGAIN_CELL_FILES}
        files |= {path: "infogain_tables" for path in INFOGAIN_TRACE_FILES}
    return files


def vouched(path: str) -> bool:
    """Whether ``path`` lies in a folder only the DAG writes into (``VOUCHED``)."""
    return path.startswith(VOUCHED)


def expected_checks(
    checks: list[FileCheck], expected: dict[str, str], listed: dict[str, str], stored: dict[str, str]
) -> list[FileCheck]:
    """The manifest comparison (``checks``, one per file listed or stored) with the expected files
    laid over it: an expected file absent from the study or from the manifest is MISSING, a file
    in a vouched folder that no rule writes for the config is EXTRA; every other check stands."""
    by_path = {c.path: c for c in checks}
    out = []
    for path in sorted(set(by_path) | (set(expected) - {STUDY_MANIFEST})):
        check = by_path.get(path)
        kept = check is not None and check.detail and check.status != UNLISTED  # "not audited" no longer holds
        also = f"; {check.detail}" if kept else ""
        rule = expected.get(path)
        if rule is not None and path not in stored:
            out.append(FileCheck(path, MISSING, f"absent from the study; rule {rule} writes it for this config{also}"))
        elif rule is not None and path not in listed:
            out.append(FileCheck(path, MISSING, f"not in the manifest; rule {rule} writes it for this config{also}"))
        elif rule is None and vouched(path):
            where = "listed in the manifest" if path in listed else "not in the manifest"
            out.append(FileCheck(path, EXTRA, f"no rule writes it for this config ({where}){also}"))
        elif check is not None:
            out.append(check)
    return out
