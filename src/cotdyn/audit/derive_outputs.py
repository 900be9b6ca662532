"""The audit's re-derivation of what lies beside the registered analysis (docs/reference.md section 7):
each variant's exploratory tables and figures, its Math-Shepherd labels, the sensitivity sweeps
over every variant, and the grading tables and page under report/grading/. Each is written into
the audit's scratch folder by the function its rule calls (workflow/scripts/exploratory.py,
math_shepherd.py, sweeps.py, grading.py, grading_page.py), from the re-derived records and the
raw files the bounds admitted, so the audit compares them with the study's byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cotdyn.audit.view import StudyView
from cotdyn.files.layout import GRADING_PAGE, grading_file, reference_file, sample_page, variant_file
from cotdyn.files.writers import write_text
from cotdyn.methods.math_shepherd import math_shepherd_csv
from cotdyn.plan.config import reference_id, samples_variant
from cotdyn.report.exploratory_tables import derive_sweeps, write_exploratory
from cotdyn.report.grading import (
    grading_page,
    grading_tables,
    read_grading,
    write_grading,
)
from cotdyn.report.sample_browser import browser_page, cell_section, cell_view


def derive_exploratory(records_paths: list, protocol: dict, plan: dict, out_dir: Path) -> list[Path]:
    """analysis/<variant>/exploratory/ as rule exploratory writes it: the variant's m and epsilon,
    the plan's bootstrap."""
    records = pd.concat([pd.read_parquet(r) for r in records_paths], ignore_index=True)
    boot = plan["analysis"]["bootstrap"]
    return write_exploratory(
        records,
        out_dir,
        m=int(protocol["m"]),
        epsilon=float(protocol["epsilon"]),
        seed=int(boot["seed"]),
        resamples=int(boot["resamples"]),
        level=float(boot["level"]),
    )


def derive_math_shepherd(cells: list[tuple], protocol: dict, out: Path) -> Path:
    """analysis/<variant>/math_shepherd.csv as rule math_shepherd writes it; ``cells``: (cell, answer
    rule, the variant's samples, the chains, the records path) per cell."""
    rows = [(c, rule, samples, chains, pd.read_parquet(r)) for c, rule, samples, chains, r in cells]
    return write_text(math_shepherd_csv(rows, protocol), out)


def derive_sweeps_files(scratch: Path, cells: dict, variants: list[str], plan: dict) -> list[Path]:
    """analysis/sweeps.csv and .html as rule sweeps writes them, when every cell of every variant
    was re-derived (otherwise the audit names them as not re-derived)."""
    summaries = [scratch / variant_file(c, v, "summary.json") for c in cells for v in variants]
    records = [scratch / variant_file(c, v, "records.parquet") for c in cells for v in variants]
    if not all(p.exists() for p in summaries + records):
        return []
    boot = plan["analysis"]["bootstrap"]
    registered = "registered"  # rule sweeps' params.registered
    return derive_sweeps(
        summaries,
        records,
        registered,
        seed=int(boot["seed"]),
        resamples=int(boot["resamples"]),
        level=float(boot["level"]),
        out_csv=scratch / "analysis/sweeps.csv",
        out_html=scratch / "analysis/sweeps.html",
    )


def grading_variant(protocols: dict) -> str:
    """The variant the grading page reads (workflow/rules/grading.smk's GRADING_VARIANT)."""
    return "registered" if "registered" in protocols else next(iter(protocols))


def grading_inputs(view: StudyView, config: dict, cells: dict, protocols: dict):
    """Each cell's (name, spec, chains, the grading variant's samples, problems) as the grading page
    reads them, without their token ids (which the page does not show), through the study's view
    (``cotdyn.audit.view``); a cell with one of them missing or refused ends them."""
    variant = grading_variant(protocols)
    for name, spec in cells.items():
        chains = view.table(reference_file(name, reference_id(protocols[variant]), "chains.parquet"), ids=False)
        samples = view.table(variant_file(name, samples_variant(config, variant), "samples.parquet"), ids=False)
        problems = view.problems(spec.benchmark_key)
        if chains is None or samples is None or problems is None:
            return
        yield name, spec, chains, samples, problems


def derive_grading(view: StudyView, scratch: Path, config: dict, cells: dict, protocols: dict) -> list[Path]:
    """report/grading/<cell>/*.csv and report/grading/grading.html as rules grading and grading_page
    write them, from the stored chains, the grading variant's stored samples and each benchmark's
    stored problems (``grading_inputs``: a raw file the bounds refuse leaves the page not
    re-derived, and the audit fails it)."""
    variant = grading_variant(protocols)
    answer_form, tables, written = protocols[variant]["answer_form"], {}, []
    done = 0
    for name, spec, chains, samples, problems in grading_inputs(view, config, cells, protocols):
        cell_tables = grading_tables(chains, samples, problems, spec.answer_rule, name, answer_form)
        folder = scratch / grading_file(name, "")
        written += write_grading(cell_tables, folder)
        tables[name] = read_grading(folder)  # as rule grading_page reads them: back from the CSVs
        done += 1
    if done == len(cells):
        written.append(write_text(grading_page(tables, variant), scratch / GRADING_PAGE))
    return written


def derive_sample_page(
    view: StudyView, scratch: Path, config: dict, cells: dict, variant: str, protocol: dict
) -> Path | None:
    """report/samples/<variant>.html as rule sample_browser writes it, from the stored chains and
    samples (without their token ids), the re-derived records and the stored problems, read through
    the study's view (``cotdyn.audit.view``); None (the page then fails as not re-derived) when one
    is missing or refused. Each cell's section is rendered as its tables are read, so no more than
    one cell's are held."""
    sections = []
    for name, spec in cells.items():
        chains = view.table(reference_file(name, reference_id(protocol), "chains.parquet"), ids=False)
        stored = variant_file(name, samples_variant(config, variant), "samples.parquet")
        samples, records = view.table(stored, ids=False), scratch / variant_file(name, variant, "records.parquet")
        problems = view.problems(spec.benchmark_key)
        if chains is None or samples is None or not records.exists() or problems is None:
            return None
        jsonl = stored.removesuffix(".parquet") + ".jsonl"
        shown = cell_view(chains, samples, records, problems, protocol, jsonl)
        sections.append(cell_section(name, shown, protocol))
    return write_text(browser_page(variant, sections), scratch / sample_page(variant))
