"""The study's path layout: every file a study writes, relative to ``results/<study>/``.

One place for the Snakemake rules, the study manifest, the audit and the tests. A function takes
names or Snakemake wildcards alike (``variant_file("{cell}", "{variant}", "records.parquet")``).
"""

from __future__ import annotations

from typing import Iterable

PLAN_CHECK = "checks/plan_check.json"
STUDY_MANIFEST = "manifest/manifest.json"
SWEEPS = ("analysis/sweeps.csv", "analysis/sweeps.html")
# Seed 003's further analyses, when the plan pre-specifies them (analysis.secondary; plan version 2).
SECONDARY = "secondary/tables.html"
GENERATIONS = "analysis/generations/tables.html"
# The registered analysis of one variant (cotdyn.analysis.hypotheses.write_analysis writes them).
ANALYSIS_FILES = ("hypotheses.json", "panel_table.csv", "h2_table.csv", "h3_buckets.csv", "h4_table.csv",
                  "h5_table.csv", "holm_table.csv", "forest_gaps.png", "verdicts_table.csv")  # fmt: skip

# Seed 002's outputs of one variant (cotdyn.report.dynamics_plots.write_dynamics writes them; rule dynamics).
DYNAMICS_FILES = ("profiles.csv", "variance_decomposition.csv", "objective_profiles.csv", "mechanism_shares.csv",
                  "disagreement_pairs.csv", "disagreement_curve.csv", "disagreement.png", "mechanism_shares.png",
                  "trajectories.png")  # fmt: skip

# Seed 002 Figure 4 over the variants a config's dynamics_comparisons names (rule dynamics_interventions).
INTERVENTION_FILES = tuple(f"analysis/dynamics_interventions/{name}"
                           for name in ("conditions.csv", "changes.csv", "effects.csv", "figure4.png"))  # fmt: skip

# Seed 000 on the study's own traces: the cross-cell tables (rule infogain_tables).
INFOGAIN_TRACE_FILES = ("infogain/traces/ig_table.csv", "infogain/traces/detection_table.csv")

# The outputs beyond the registered analysis a study may make (config ``extras``): seed 002's
# dynamics, the exploratory tables, Math-Shepherd labels, the sensitivity sweeps and seed 003's
# secondary tables (the last only where the plan pre-specifies them). A config without the key
# makes them all, as every config did before the key existed; the embedded default makes none.
EXTRAS = ("dynamics", "exploratory", "math_shepherd", "sweeps", "secondary")


def study_extras(config: dict) -> frozenset[str]:
    """The extras a study's config asks for (``EXTRAS``); seed 002's Figure 4 comparisons
    (``dynamics_comparisons``) read the dynamics, so they bring them."""
    extras = set(config.get("extras", EXTRAS))
    return frozenset(extras | ({"dynamics"} if config.get("dynamics_comparisons") else set()))


def problems(benchmark: str) -> str:
    return f"problems/{benchmark}.parquet"


def reference_file(cell: str, ref: str, name: str) -> str:
    """A reference-chain file (chains.parquet, generation.json); ``ref`` is config.reference_id."""
    return f"cells/{cell}/reference/{ref}/{name}"


def variant_file(cell: str, variant: str, name: str) -> str:
    """A file of one cell under one protocol variant: samples, records, summary, generation log."""
    return f"cells/{cell}/{variant}/{name}"


def analysis_file(variant: str, name: str) -> str:
    """An analysis output of one variant over all cells (``name`` may hold a subfolder)."""
    return f"analysis/{variant}/{name}"


def cell_manifest(cell: str) -> str:
    return f"manifest/cells/{cell}.json"


def study_targets(
    cells: Iterable[str],
    variants: Iterable[str],
    *,
    extras: Iterable[str] = (),
    secondary: bool = False,
    interventions: bool = False,
    infogain_traces: bool = False,
) -> list[str]:
    """Every final output of a study but its manifest: what ``rule all`` asks for, what the study
    manifest waits for (so it hashes a finished study), and what the audit expects listed.
    ``extras``: the config's (``study_extras``);
    ``secondary``: the plan pre-specifies seed 003's further analyses (``SECONDARY``, ``GENERATIONS``);
    ``interventions``: the study's config names seed 002 Figure 4 comparisons;
    ``infogain_traces``: the study's config has ``infogain.traces`` (seed 000 on its own traces)."""
    cells, variants, extras = list(cells), list(variants), set(extras)
    secondary = secondary and "secondary" in extras
    per_variant = [
        *ANALYSIS_FILES,
        *((f"dynamics/{name}" for name in DYNAMICS_FILES) if "dynamics" in extras else ()),
        *(("exploratory/tables.html",) if "exploratory" in extras else ()),
        *(("math_shepherd.csv",) if "math_shepherd" in extras else ()),
    ]
    return [
        *(variant_file(c, v, "summary.json") for c in cells for v in variants),
        *(cell_manifest(c) for c in cells),
        *(analysis_file(v, name) for v in variants for name in per_variant),
        *(SWEEPS if "sweeps" in extras else ()),
        *((analysis_file(v, SECONDARY) for v in variants) if secondary else ()),
        *((GENERATIONS,) if secondary else ()),
        *(INTERVENTION_FILES if interventions else ()),
        *(INFOGAIN_TRACE_FILES if infogain_traces else ()),
    ]


# The report's pages, written after the study manifest from the audit's result (so neither is in
# the manifest: cotdyn.provenance.manifests leaves the report folder out).
REPORT_DIR = "report"
AUDIT_RESULT = f"{REPORT_DIR}/audit.json"
REPORT_PAGES = ("header.html", "registered_results.html")
# The grading page (cotdyn.report.grading): per cell, its tables as CSV; one HTML page of all cells.
GRADING_FILES = ("parse_status.csv", "disagreements.csv", "graded_sample.csv")
GRADING_PAGE = f"{REPORT_DIR}/grading/grading.html"


# The per-sample browser page of each variant (cotdyn.report.sample_browser; rule sample_browser).
SAMPLE_PAGES = f"{REPORT_DIR}/samples"


def sample_page(variant: str) -> str:
    return f"{SAMPLE_PAGES}/{variant}.html"


def grading_file(cell: str, name: str) -> str:
    return f"{REPORT_DIR}/grading/{cell}/{name}"


def report_page(variant: str, name: str) -> str:
    return f"{REPORT_DIR}/{variant}/{name}"


def report_targets(variants: Iterable[str], cells: Iterable[str] = ()) -> list[str]:
    """The audit's result, every variant's report pages and, given the study's cells, the grading
    page and its tables and each variant's sample browser: what ``rule all`` asks for beside the
    manifest."""
    cells = list(cells)
    return [
        AUDIT_RESULT,
        *(report_page(v, name) for v in variants for name in REPORT_PAGES),
        *(grading_file(c, name) for c in cells for name in GRADING_FILES),
        *((GRADING_PAGE,) if cells else ()),
        *((sample_page(v) for v in variants) if cells else ()),
    ]
