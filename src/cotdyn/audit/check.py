"""The reviewer's audit (docs/design.md section 7): re-derive every analysis output and compare hashes.

From the stored generations alone (chains.parquet, samples.parquet) and the study manifest's
config, the audit re-extracts every continuation's answer from its text, re-derives records,
summaries, the plan check and the registered analysis in a scratch directory, and compares each
file's sha256 with the manifest and with the file on disk. It also re-checks the plan's
registered hash and lists every undeclared deviation. CPU only; no model weights.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd

from cotdyn.analysis.hypotheses import analyze, read_records, write_analysis
from cotdyn.audit.diff import changed_answers, changed_rows
from cotdyn.audit.locate import locate_plan, not_found_message
from cotdyn.audit.pages import check_pages
from cotdyn.audit.raw import apply_raw_checks, raw_checks
from cotdyn.dataset.benchmarks import content_sha256, problems_from_table
from cotdyn.files.layout import (
    GENERATIONS,
    INTERVENTION_FILES,
    PLAN_CHECK,
    STUDY_MANIFEST,
    analysis_file,
    reference_file,
    study_targets,
    variant_file,
)
from cotdyn.files.layout import problems as problems_file
from cotdyn.files.writers import write_json, write_parquet
from cotdyn.grading import answers
from cotdyn.plan.config import (
    ConfigError,
    cut_answers,
    protocol_for,
    reference_id,
    resolve_cells,
    samples_variant,
)
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import (
    PreregistrationError,
    check_registered,
    load_deviations,
    plan_check,
    sibling_paths,
    undeclared_differences,
    undeclared_message,
)
from cotdyn.provenance.integrity import MATCH, MISMATCH, MISSING, UNLISTED, AuditReport, FileCheck
from cotdyn.provenance.manifests import ManifestError, config_sha256, output_hashes
from cotdyn.records.derive import derive_records
from cotdyn.records.table import variant_samples
from cotdyn.report.secondary_tables import derive_generations, derive_secondary, has_secondary


def study_protocols(config: dict, plan: dict) -> dict[str, dict]:
    return {v: protocol_for(config, plan, v) for v in config.get("variants", {"registered": {}})}


# --- derivations shared by the workflow's rules and the audit --------------------------------


def write_plan_check(plan_path, config: dict, out) -> dict:
    """checks/plan_check.json: the registered hash and every confirmatory cell's declared deviations;
    raises on an edited plan or an undeclared deviation."""
    plan = load_plan(plan_path)
    check = plan_check(
        plan_path, list(config["cells"]), list(config.get("confirmatory", [])), study_protocols(config, plan), plan
    )
    write_json(check, out)
    return check


def derive_analysis(records_paths: list, plan_path, plan_check_path, out_dir) -> list[Path]:
    """analysis/<variant>/: the registered analysis over all cells' records, naming the plan's hash
    and the preregistration status (declared deviations) of every analysed cell."""
    records = read_records(records_paths)
    check = json.loads(Path(plan_check_path).read_text())
    result = analyze(records, load_plan(plan_path), plan_sha256(plan_path))
    cells = sorted(records["cell"].astype(str).unique())
    result["preregistration"] = {"registered": check["registered"], "cells": {c: check["cells"].get(c) for c in cells}}
    return write_analysis(result, records, Path(out_dir))


def derive_dynamics(samples: list[pd.DataFrame], records_paths: list, cells: dict, protocol: dict, out) -> None:
    """analysis/<variant>/dynamics/ as rule dynamics writes it: the variant's samples (its m and
    endpoint applied), its records, its null rule, equivalence and endpoint, each cell's answer rule."""
    from cotdyn.report.dynamics_plots import write_dynamics

    records = pd.concat([pd.read_parquet(p) for p in records_paths], ignore_index=True)
    write_dynamics(
        pd.concat(samples, ignore_index=True),
        records,
        Path(out),
        null_class=protocol["null_answers"] == "class",
        benchmarks={name: spec.answer_rule for name, spec in cells.items()},
        equivalence=protocol["equivalence"],
        endpoint=protocol["endpoint"],
    )


def derive_interventions(comparisons: dict, variants: list[str], scratch: Path) -> None:
    """analysis/dynamics_interventions/ (seed 002 Figure 4) from the re-derived profiles, as rule
    dynamics_interventions writes it."""
    from cotdyn.methods.dynamics_interventions import comparison_variants, write_interventions

    named = comparison_variants(comparisons, variants)
    paths = {v: scratch / analysis_file(v, "dynamics/profiles.csv") for v in named}
    if all(p.exists() for p in paths.values()):
        profiles = {v: pd.read_csv(p) for v, p in paths.items()}
        write_interventions(profiles, dict(comparisons), scratch / Path(INTERVENTION_FILES[0]).parent)


def reextract_answers(
    samples: pd.DataFrame, benchmark: str, options: dict[str, tuple[str, ...]] | None = None
) -> tuple[pd.DataFrame, int]:
    """Samples with answer and status re-extracted from each continuation's text, and the number
    of rows whose stored answer or status differs from the re-extraction. ``options``: each
    multiple-choice problem's option texts."""
    options = options or {}
    found = [answers.extract(t, benchmark, options.get(p)) for t, p in zip(samples["text"], samples["problem_id"])]
    out = samples.copy()
    out["answer"] = [f.answer for f in found]
    out["status"] = [f.status for f in found]
    stored = answers.answers_or_none(samples["answer"])
    changed = sum(a != f.answer or s != f.status for a, s, f in zip(stored, samples["status"], found))
    return out, int(changed)


# --- the report ------------------------------------------------------------------------------


# Analysis outputs the audit does not yet re-derive (exploratory tables, sweep table, Math-Shepherd
# labels, report headers, information gain on traces): the audit checks their stored hashes only.
HASH_CHECKED_ONLY = (
    "/exploratory/",
    "math_shepherd.csv",
    "report_header.html",
    "analysis/sweeps.",
    "infogain/traces/",
)


def is_derived(path: str) -> bool:
    """Whether a study file is a function of the stored generations, plan and config that the
    audit re-derives, rather than a stored generation, a record of the run, or an output whose
    hash alone is checked."""
    if any(part in path for part in HASH_CHECKED_ONLY):
        return False
    return (
        path == PLAN_CHECK
        or path.startswith("analysis/")
        or (path.startswith("cells/") and path.endswith(("/records.parquet", "/summary.json")))
    )


def compare_files(listed: dict[str, str], stored: dict[str, str], derived: dict[str, str]) -> list[FileCheck]:
    """Per file: the manifest's hash against the file on disk and, where the audit re-derived it,
    against the re-derivation. Files on disk but not in the manifest are listed, not failed;
    re-derived files the manifest lacks fail, and so do derived files the audit could not re-derive."""
    checks = []
    for path in sorted(set(listed) | set(stored) | set(derived)):
        want = listed.get(path)
        if want is not None and is_derived(path) and path not in derived:
            checks.append(FileCheck(path, MISSING, "could not be re-derived from samples and chains"))
        elif want is None:
            if path in derived:
                checks.append(FileCheck(path, MISSING, "re-derived, but the manifest does not list it"))
            else:
                checks.append(FileCheck(path, UNLISTED, "not in the manifest; not audited"))
        elif path not in stored:
            checks.append(FileCheck(path, MISSING, "listed in the manifest, absent from the study"))
        elif stored[path] != want:
            checks.append(FileCheck(path, MISMATCH, f"stored sha256 {stored[path]} != manifest {want}"))
        elif path in derived and derived[path] != want:
            checks.append(
                FileCheck(
                    path, MISMATCH, f"re-derived from samples and chains: sha256 {derived[path]} != manifest {want}"
                )
            )
        else:
            checks.append(FileCheck(path, MATCH, "re-derived" if path in derived else "stored"))
    return checks


def _options(study_dir: Path, spec) -> dict[str, tuple[str, ...]]:
    """Option texts of a cell's multiple-choice problems, from the study's stored problems table."""
    path = study_dir / problems_file(spec.benchmark_key)
    if not path.exists():
        return {}
    return {p.problem_id: p.options for p in problems_from_table(pd.read_parquet(path)) if p.options}


def _problems_path(study_dir: Path, spec) -> Path | None:
    """A cell's stored problems table (its golds as written, which math-verify reads), if stored."""
    path = study_dir / problems_file(spec.benchmark_key)
    return path if path.exists() else None


def benchmark_hash_problems(study_dir: Path, config: dict, plan: dict) -> list[str]:
    """The plan freezes each panel benchmark's content sha256; re-check it against the problems the
    study stored (all of them: a cell that used a ``limit`` was checked in full when it loaded,
    and its stored subset is checked against the manifest instead) and against the config."""
    problems = []
    panel = plan.get("panel", {}).get("benchmarks", {})
    for key, entry in sorted(config["benchmarks"].items()):
        pinned = (panel.get(key) or {}).get("content_sha256")
        if pinned is None:
            continue
        if entry.get("content_sha256") not in (None, pinned):
            problems.append(
                f"benchmark {key}: the config pins content sha256 {entry['content_sha256']}, the plan {pinned}"
            )
        path = study_dir / problems_file(key)
        if entry.get("limit") or not path.exists():
            continue
        found = content_sha256(problems_from_table(pd.read_parquet(path)))
        if found != pinned:
            problems.append(f"{problems_file(key)}: content sha256 {found} differs from the plan's {pinned}")
    return problems


def _rederive(study_dir: Path, scratch: Path, config: dict, plan_path: Path, problems: list[str]) -> None:
    """Write into ``scratch`` every derived file: records, summaries, plan check, analyses."""
    plan = load_plan(plan_path)
    cells = resolve_cells(config, plan, "manifest config")
    protocols = study_protocols(config, plan)
    try:
        write_plan_check(plan_path, config, scratch / PLAN_CHECK)
    except PreregistrationError as e:
        problems.append(f"plan check: {e}")
    problems += benchmark_hash_problems(study_dir, config, plan)
    deviations = load_deviations(sibling_paths(plan_path)[1])
    for cell in config.get("confirmatory", []):
        if "registered" in protocols:
            problems += [
                f"undeclared deviation: {undeclared_message(cell, d)}"
                for d in undeclared_differences(cell, protocols["registered"], plan, deviations)
            ]
    all_records = []
    for variant, protocol in protocols.items():
        records_paths, dynamics_samples = [], []
        for name, spec in cells.items():
            chains = study_dir / reference_file(name, reference_id(protocol), "chains.parquet")
            samples_path = study_dir / variant_file(name, samples_variant(config, variant), "samples.parquet")
            if not chains.exists() or not samples_path.exists():
                problems.append(f"cell {name}, variant {variant}: stored generations missing, nothing to re-derive")
                continue
            rule = spec.answer_rule
            samples, changed = reextract_answers(pd.read_parquet(samples_path), rule, _options(study_dir, spec))
            if changed:
                rows = changed_answers(pd.read_parquet(samples_path), samples)
                problems.append(
                    f"{variant_file(name, variant, 'samples.parquet')}: {changed} stored answers "
                    "differ from the answers extracted from their text: "
                    + "; ".join(rows[:5])
                    + (f"; and {len(rows) - 5} more" if len(rows) > 5 else "")
                )
            scratch_samples = scratch / "generations" / variant_file(name, variant, "samples.parquet")
            write_parquet(samples, scratch_samples)
            records = scratch / variant_file(name, variant, "records.parquet")
            derive_records(
                chains,
                scratch_samples,
                protocol,
                plan["exclusion"],
                rule,
                name,
                records,
                scratch / variant_file(name, variant, "summary.json"),
                groups=plan["analysis"].get("groups"),
                cut_answers=cut_answers(config, variant),
                problems_path=_problems_path(study_dir, spec),
            )
            records_paths.append(records)
            dynamics_samples.append(variant_samples(samples, pd.read_parquet(chains), protocol).assign(cell=name))
        if records_paths:
            derive_dynamics(
                dynamics_samples, records_paths, cells, protocol, scratch / analysis_file(variant, "dynamics")
            )
        if records_paths and (scratch / PLAN_CHECK).exists():
            derive_analysis(records_paths, plan_path, scratch / PLAN_CHECK, scratch / analysis_file(variant, ""))
            if has_secondary(plan):
                hypotheses = scratch / analysis_file(variant, "hypotheses.json")
                out = scratch / analysis_file(variant, "secondary")
                derive_secondary(records_paths, hypotheses, plan, float(protocol["epsilon"]), out)
                all_records += records_paths
    if config.get("dynamics_comparisons"):
        derive_interventions(config["dynamics_comparisons"], list(protocols), scratch)
    analyses = [scratch / analysis_file(v, "hypotheses.json") for v in protocols]
    if has_secondary(plan) and all(p.exists() for p in analyses):
        benchmarks = {name: spec.answer_rule for name, spec in cells.items()}
        derive_generations(all_records, analyses, protocols, plan, scratch / Path(GENERATIONS).parent, benchmarks)


def audit(study_dir, plan_path=None, scratch=None) -> AuditReport:
    """Audit a finished study directory against its manifest (see the module docstring)."""
    study_dir = Path(study_dir)
    report = AuditReport(str(study_dir))
    manifest_path = study_dir / STUDY_MANIFEST
    if not manifest_path.exists():
        report.problems.append(f"{manifest_path} not found: the study has no manifest to audit against")
        return report
    manifest = json.loads(manifest_path.read_text())
    config = manifest["config"]
    if config_sha256(config) != manifest["config_sha256"]:
        report.problems.append(
            f"manifest config hashes to {config_sha256(config)}, manifest says {manifest['config_sha256']}"
        )
    if plan_path is None:  # the config's plan, found from the study wherever the audit runs
        plan_path = locate_plan(study_dir, config["plan"], manifest.get("plan_sha256"))
    if plan_path is None or not Path(plan_path).is_file():
        report.problems.append(not_found_message(study_dir, plan_path or config["plan"]))
        return report
    plan_path = Path(plan_path)
    registered_path = sibling_paths(plan_path)[0]
    try:
        check_registered(plan_path, registered_path)
    except PreregistrationError as e:
        report.problems.append(str(e))
    if plan_sha256(plan_path) != manifest["plan_sha256"]:
        report.problems.append(
            f"{plan_path} has sha256 {plan_sha256(plan_path)}, the study ran under {manifest['plan_sha256']}"
        )
    with tempfile.TemporaryDirectory(prefix="cotdyn-audit-") as tmp:
        work = Path(scratch) if scratch else Path(tmp)
        derived_dir = work / "derived"
        try:
            _rederive(study_dir, derived_dir, config, plan_path, report.problems)
        except (ConfigError, PreregistrationError, ValueError, KeyError) as e:
            report.problems.append(f"re-derivation failed: {type(e).__name__}: {e}")
        derived = {p: h for p, h in output_hashes(derived_dir).items() if not p.startswith("generations/")}
        try:
            stored = output_hashes(study_dir)
        except ManifestError as e:
            report.problems.append(str(e))
            return report
        report.files = [
            with_changed_rows(f, study_dir, derived_dir) for f in compare_files(manifest["files"], stored, derived)
        ]
        report.files = check_pages(report.files, study_dir, derived_dir)  # the report pages, re-rendered
    try:
        cells = resolve_cells(config, load_plan(plan_path), "manifest config")
        report.files = apply_raw_checks(
            report.files, raw_checks(study_dir, config, study_protocols(config, load_plan(plan_path)), cells)
        )
    except ConfigError as e:
        report.problems.append(f"raw data not checked: {e}")
    report.problems += unlisted_targets(config, plan_path, manifest["files"])
    return report


def with_changed_rows(check: FileCheck, study_dir: Path, derived_dir: Path) -> FileCheck:
    """A mismatching file that the audit re-derived, with the rows that differ named in its detail."""
    stored, derived = study_dir / check.path, derived_dir / check.path
    if check.status != MISMATCH or not stored.exists() or not derived.exists():
        return check
    rows = changed_rows(stored, derived)
    return FileCheck(check.path, check.status, f"{check.detail}; {rows}") if rows else check


def unlisted_targets(config: dict, plan_path: Path, listed: dict[str, str]) -> list[str]:
    """The study's final outputs (cotdyn.files.layout.study_targets) that its manifest does not hash."""
    try:
        cells = resolve_cells(config, load_plan(plan_path), "manifest config")
    except ConfigError as e:
        return [f"study targets unknown: {e}"]
    variants = config.get("variants", {"registered": {}})
    targets = study_targets(
        cells,
        variants,
        has_secondary(load_plan(plan_path)),
        bool(config.get("dynamics_comparisons")),
        bool(config.get("infogain", {}).get("traces")),
    )
    missing = [t for t in targets if t not in listed]
    return [f"study output {t} is not in the manifest" for t in missing]


def write_report(report: AuditReport, path) -> None:
    write_json(report.as_dict(), path)
