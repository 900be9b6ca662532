"""The study's files as the rules name them: raw files, targets, logs and report items."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from cotdyn.files import layout
from cotdyn.plan.config import reference_id, samples_variant
from cotdyn.plan.registration import sibling_paths
from cotdyn.provenance.seal import seal_path
from cotdyn.report.secondary_tables import has_secondary
from cotdyn.workflow.study import Study


def chains_file(study: Study, cell: str, variant: str) -> str:
    """The reference chains a cell's variant reads (shared by variants with the same settings)."""
    return f"{study.dir}/{layout.reference_file(cell, reference_id(study.protocols[variant]), 'chains.parquet')}"


def samples_file(study: Study, cell: str, variant: str) -> str:
    """The samples a cell's variant reads (another variant's, for ``subsample_of``)."""
    return f"{study.dir}/{layout.variant_file(cell, samples_variant(study.config, variant), 'samples.parquet')}"


def samples_jsonl_files(study: Study) -> list[str]:
    """The samples as JSON lines (rule samples_jsonl), beside each generating variant's parquet."""
    return [f"{study.dir}/cells/{c}/{v}/samples.jsonl" for c in study.cell_names for v in study.generating]


def raw_targets(study: Study) -> list[str]:
    """Every cell's chains, samples and their seals, and every variant's records: study targets, so
    a deleted one is regenerated (from the cache) instead of silently missing."""
    cells, variants = study.cell_names, study.variants
    raw = {chains_file(study, c, v) for c in cells for v in variants}
    raw |= {samples_file(study, c, v) for c in cells for v in study.generating}
    records = [f"{study.dir}/{layout.variant_file(c, v, 'records.parquet')}" for c in cells for v in variants]
    return sorted(raw | {str(seal_path(p)) for p in raw}) + records


def study_targets(study: Study) -> list[str]:
    """Every final output of the study but its manifest (cotdyn.files.layout.study_targets), and its
    raw data (raw_targets)."""
    return raw_targets(study) + [
        f"{study.dir}/{path}"
        for path in layout.study_targets(
            study.cell_names,
            study.variants,
            extras=layout.study_extras(study.config),
            secondary=has_secondary(study.plan),
            interventions=bool(study.config.get("dynamics_comparisons")),
            infogain_traces=bool(study.infogain_traces),
        )
    ]


def report_targets(study: Study) -> list[str]:
    """The audit's result, every variant's report pages and the grading page (cotdyn.files.layout.report_targets)."""
    return [f"{study.dir}/{path}" for path in layout.report_targets(study.variants, study.cell_names)]


def infogain_trace_targets(study: Study) -> list[str]:
    """The cross-cell information-gain tables, when the config asks for them (also study targets)."""
    return [f"{study.dir}/{path}" for path in layout.INFOGAIN_TRACE_FILES] if study.infogain_traces else []


def model_inputs(study: Study, wildcards) -> list[str]:
    """The converted weights a cell's generation reads, when its model ships as GGUF (an input function)."""
    spec = study.cells[wildcards.cell]
    return [f"results/models/{spec.model_key}/SOURCE"] if "gguf" in spec.model else []


def preregistration_inputs(study: Study, wildcards=None) -> list[str]:
    """plan.yaml, REGISTERED and (when present) deviations.yaml: a change to any re-runs the check
    (an input function)."""
    registered, deviations = sibling_paths(study.plan_path)
    return [study.plan_path, str(registered)] + ([str(deviations)] if deviations.exists() else [])


def generation_logs(study: Study, chains_path: Callable[[str, str], str], cell: str) -> dict[str, str]:
    """A cell's generation.json of every generating variant and of every reference its variants read
    (found through ``chains_path``, which checks the chains' seal)."""
    logs = {v: f"{study.dir}/cells/{cell}/{v}/generation.json" for v in study.generating}
    for v in study.generating:
        ref = Path(chains_path(cell, v)).parent
        logs[f"reference/{ref.name}"] = str(ref / "generation.json")
    return logs


def given_paths(study: Study) -> list[str]:
    """The paths a run reads or writes, resolved: the study folder it writes, the cache it shares, the
    plan and every benchmark file it reads (they may point anywhere; nothing is written outside the
    study folder, the cache and the logs)."""
    paths = {"study": study.dir, "cache": study.cache, "plan": study.plan_path}
    paths |= {f"data {k}": b["path"] for k, b in sorted(study.config["benchmarks"].items()) if b.get("path")}
    return [f"  {name}: {Path(path).resolve()}" for name, path in paths.items()]


def sealed_files(sealed: Callable[[str], str], file: Callable[[str, str], str]) -> Callable[[str, str], str]:
    """``file``'s path of a cell and variant, through ``sealed`` (cotdyn.workflow.seals.Seals.sealed)."""
    return lambda cell, variant: sealed(file(cell, variant))


def exploratory_item(study: Study, name: str, kind: str) -> dict:
    """An exploratory output of a variant with its caption, as Snakemake's ``report()`` takes it."""
    return {
        "value": f"{study.dir}/analysis/{{variant}}/exploratory/{name}",
        "caption": f"../report/exploratory_{name.replace('.', '_')}.rst",
        "category": "2. Exploratory analyses",
        "subcategory": "{variant}",
        "labels": {"variant": "{variant}", "kind": kind, "output": name.rsplit(".", 1)[0]},
    }


def secondary_item(folder: str, name: str, kind: str, subcategory: str) -> dict:
    """A table of seed 003's further analyses with its caption, as Snakemake's ``report()`` takes it."""
    return {
        "value": f"{folder}/{name}",
        "caption": f"../report/secondary_{name.replace('.', '_')}.rst",
        "category": "2. Exploratory analyses",
        "subcategory": subcategory,
        "labels": {"variant": subcategory, "kind": kind, "output": name.rsplit(".", 1)[0]},
    }
