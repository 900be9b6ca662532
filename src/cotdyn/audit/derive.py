"""The re-derivations of the audit (docs/reference.md section 7), shared with the workflow's rules.

From the stored generations alone (chains.parquet, samples.parquet) and the study manifest's
config, ``rederive`` re-extracts every continuation's answer from its text and re-derives records,
summaries, the plan check and the registered analysis in a scratch directory; the rules that write
these files call the same functions. It reads the study through its view (``cotdyn.audit.view``):
a raw file ``cotdyn.audit.bounds`` refused is not read.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cotdyn.analysis.hypotheses import analyze, read_records, write_analysis
from cotdyn.analysis.hypotheses.limited import descriptive_only
from cotdyn.audit.derive_outputs import (
    derive_exploratory,
    derive_math_shepherd,
    derive_sample_page,
    derive_sweeps_files,
)
from cotdyn.audit.diff import changed_answers
from cotdyn.audit.view import StudyView, read_problems  # noqa: F401  (read_problems: regenerate and tests import it here)
from cotdyn.dataset.benchmarks import content_sha256, problems_from_table
from cotdyn.files.layout import (
    GENERATIONS,
    INTERVENTION_FILES,
    PLAN_CHECK,
    analysis_file,
    reference_file,
    study_extras,
    variant_file,
)
from cotdyn.files.layout import problems as problems_file
from cotdyn.files.strict import read_json
from cotdyn.files.writers import write_parquet
from cotdyn.grading import answers
from cotdyn.plan.config import confirmatory_cells, cut_answers, reference_id, samples_variant
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import (  # noqa: F401  (write_plan_check: the audit's callers import it from here)
    PreregistrationError,
    load_deviations,
    sibling_paths,
    undeclared_differences,
    undeclared_message,
    write_plan_check,
)
from cotdyn.records.derive import derive_records
from cotdyn.records.export import write_samples_jsonl
from cotdyn.records.table import variant_samples
from cotdyn.report.secondary_tables import derive_generations, derive_secondary, has_secondary

# what Math-Shepherd labels read of the chains (methods.math_shepherd), kept for every cell in place
# of the chains, whose texts and token ids would make the audit's memory grow with the panel
SHEPHERD_CHAIN_COLUMNS = ("problem_id", "reference_truncated", "chain_answer")
MAX_PLAN_CHECK_BYTES = 64 << 20  # checks/plan_check.json: a few lines per cell

# --- derivations shared by the workflow's rules and the audit --------------------------------


def derive_analysis(records_paths: list, plan_path, plan_check_path, out_dir) -> list[Path]:
    """analysis/<variant>/: the registered analysis over all cells' records, naming the plan's hash
    and the preregistration status (declared deviations) of every analysed cell."""
    check = read_json(plan_check_path, max_bytes=MAX_PLAN_CHECK_BYTES)  # strictly: cotdyn.files.strict
    records = read_records(records_paths)
    result = analyze(records, load_plan(plan_path), plan_sha256(plan_path))
    cells = sorted(records["cell"].astype(str).unique())
    result["preregistration"] = {"registered": check["registered"], "cells": {c: check["cells"].get(c) for c in cells}}
    if check.get("limit"):  # a limited study: every verdict descriptive (cotdyn.analysis.hypotheses.limited)
        result = descriptive_only(result, int(check["limit"]["problems"]), str(check["limit"]["scope"]))
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
        answer_form=protocol["answer_form"],
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
    # an answer is a function of its text and its problem's options: each distinct pair is extracted
    # once (continuations repeat: a simulated panel cell holds some 10 rows per distinct text)
    memo: dict[tuple, answers.Extraction] = {}
    found = []
    for text, problem in zip(samples["text"].tolist(), samples["problem_id"].tolist()):
        key = (text, options.get(problem))
        if key not in memo:
            memo[key] = answers.extract(text, benchmark, key[1])
        found.append(memo[key])
    out = samples.copy()
    out["answer"] = [f.answer for f in found]
    out["status"] = [f.status for f in found]
    stored = answers.answers_or_none(samples["answer"])
    changed = sum(a != f.answer or s != f.status for a, s, f in zip(stored, samples["status"].tolist(), found))
    return out, int(changed)


def _options(view: StudyView, spec) -> dict[str, tuple[str, ...]]:
    """Option texts of a cell's multiple-choice problems, from the study's stored problems table."""
    table = view.problems(spec.benchmark_key)
    if table is None:
        return {}
    return {p.problem_id: p.options for p in problems_from_table(table) if p.options}


def _problems_path(view: StudyView, spec) -> Path | None:
    """A cell's stored problems table (its golds as written, which math-verify reads), if stored
    (``_options`` read it within its bounds first)."""
    rel = problems_file(spec.benchmark_key)
    return view.current(rel) if view.holds(rel) else None


def benchmark_hash_problems(view: StudyView, config: dict, plan: dict) -> list[str]:
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
        if entry.get("limit") or config.get("limit") or not view.holds(problems_file(key)):
            continue
        found = content_sha256(problems_from_table(view.problems(key)))
        if found != pinned:
            problems.append(f"{problems_file(key)}: content sha256 {found} differs from the plan's {pinned}")
    return problems


def rederive_cell(view: StudyView, scratch: Path, config: dict, plan: dict, spec, variant: str, protocol: dict,
                  problems: list[str]) -> tuple[Path, pd.DataFrame, pd.DataFrame] | None:  # fmt: skip
    """One cell's re-extracted samples and records under one variant: (its records, the samples
    its dynamics and Math-Shepherd labels read, the columns of its chains the labels read), or None
    when a raw file is missing or refused."""
    name = spec.name
    chains_path = reference_file(name, reference_id(protocol), "chains.parquet")
    samples_path = variant_file(name, samples_variant(config, variant), "samples.parquet")
    if not view.holds(chains_path) or not view.holds(samples_path):
        problems.append(f"cell {name}, variant {variant}: stored generations missing, nothing to re-derive")
        return None
    # the samples' token ids are not read: the records do not read them, and the raw checks digest them
    chains, stored = view.table(chains_path), view.table(samples_path, ids=False)
    if chains is None or stored is None:
        problems.append(f"cell {name}, variant {variant}: a raw file was refused (see its line), nothing re-derived")
        return None
    # the JSON lines of the stored samples, as rule samples_jsonl writes them (cotdyn.records.export)
    write_samples_jsonl(view.current(samples_path), scratch / (samples_path.removesuffix(".parquet") + ".jsonl"))
    samples, changed = reextract_answers(stored, spec.answer_rule, _options(view, spec))
    if changed:
        rows = changed_answers(stored, samples)
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
        view.current(chains_path),
        scratch_samples,
        protocol,
        plan["exclusion"],
        spec.answer_rule,
        name,
        records,
        scratch / variant_file(name, variant, "summary.json"),
        groups=plan["analysis"].get("groups"),
        cut_answers=cut_answers(config, variant),
        problems_path=_problems_path(view, spec),
        signals=config.get("signals", ()),
    )
    # kept for the cross-cell dynamics and Math-Shepherd labels, which read neither texts nor token
    # ids: held for every cell at once, those columns would make the audit's memory grow with the panel
    kept = variant_samples(samples, chains, protocol).drop(columns=["text"])
    return records, kept.assign(cell=name), chains[list(SHEPHERD_CHAIN_COLUMNS)]


def preregistration_problems(view: StudyView, scratch: Path, config: dict, plan: dict, plan_path: Path,
                             protocols: dict[str, dict]) -> list[str]:  # fmt: skip
    """The plan check (written to ``scratch``), the benchmarks' pinned hashes and every undeclared
    deviation of a confirmatory cell."""
    problems = []
    try:
        write_plan_check(plan_path, config, scratch / PLAN_CHECK)
    except PreregistrationError as e:
        problems.append(f"plan check: {e}")
    problems += benchmark_hash_problems(view, config, plan)
    deviations = load_deviations(sibling_paths(plan_path)[1])
    for cell in confirmatory_cells(config):  # none in a limited study
        if "registered" in protocols:
            problems += [
                f"undeclared deviation: {undeclared_message(cell, d, sibling_paths(plan_path)[1])}"
                for d in undeclared_differences(cell, protocols["registered"], plan, deviations)
            ]
    return problems


def rederive(view: StudyView, scratch: Path, study, problems: list[str]) -> None:
    """Write into ``scratch`` every derived file of the admitted ``study`` (cotdyn.audit.untrusted):
    records, summaries, plan check, analyses, dynamics, exploratory tables, Math-Shepherd labels,
    sweeps and the sample pages (the grading page: cotdyn.audit.derive_outputs.derive_grading)."""
    config, plan, plan_path, cells, protocols = study.config, study.plan, study.plan_path, study.cells, study.protocols
    extras = study_extras(config)
    secondary = has_secondary(plan) and "secondary" in extras
    problems += preregistration_problems(view, scratch, config, plan, plan_path, protocols)
    all_records = []
    for variant, protocol in protocols.items():
        done = [rederive_cell(view, scratch, config, plan, spec, variant, protocol, problems)
                for spec in cells.values()]  # fmt: skip
        records_paths = [d[0] for d in done if d is not None]
        if records_paths and "dynamics" in extras:
            dynamics = [d[1] for d in done if d is not None]
            derive_dynamics(dynamics, records_paths, cells, protocol, scratch / analysis_file(variant, "dynamics"))
        every_cell = records_paths and len(records_paths) == len(cells)  # as their rules: over every cell
        if every_cell and "exploratory" in extras:
            derive_exploratory(records_paths, protocol, plan, scratch / analysis_file(variant, "exploratory"))
        if every_cell and "math_shepherd" in extras:
            labelled = [(n, s.answer_rule, d[1], d[2], d[0]) for (n, s), d in zip(cells.items(), done)]
            derive_math_shepherd(labelled, protocol, scratch / analysis_file(variant, "math_shepherd.csv"))
        if records_paths and (scratch / PLAN_CHECK).exists():
            derive_analysis(records_paths, plan_path, scratch / PLAN_CHECK, scratch / analysis_file(variant, ""))
            if secondary:
                hypotheses = scratch / analysis_file(variant, "hypotheses.json")
                out = scratch / analysis_file(variant, "secondary")
                derive_secondary(records_paths, hypotheses, plan, float(protocol["epsilon"]), out)
                all_records += records_paths
    if config.get("dynamics_comparisons"):
        derive_interventions(config["dynamics_comparisons"], list(protocols), scratch)
    analyses = [scratch / analysis_file(v, "hypotheses.json") for v in protocols]
    if secondary and all(p.exists() for p in analyses):
        benchmarks = {name: spec.answer_rule for name, spec in cells.items()}
        derive_generations(all_records, analyses, protocols, plan, scratch / Path(GENERATIONS).parent, benchmarks)
    if "sweeps" in extras:
        derive_sweeps_files(scratch, cells, list(protocols), plan)
    for variant, protocol in protocols.items():  # the sample browser pages (rule sample_browser)
        derive_sample_page(view, scratch, config, cells, variant, protocol)
