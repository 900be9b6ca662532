"""The files the audit expects (cotdyn.audit.expected) are those the workflow's DAG writes, and the
audit requires them from the config, not the manifest (issue 52, items 1 and 2).

Each forgery of issue 52's findings is a test here: on d9a9ee3 each passed the audit. A study is
copied from conftest's small simulated study (run through the DAG) before it is altered.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_hostile_audit import MANIFEST, SAMPLES, copied_study

from cotdyn.audit.check import audit
from cotdyn.audit.expected import expected_files
from cotdyn.files.columns import CHAINS_COLUMNS, RAW_CONTRACTS, SAMPLES_COLUMNS
from cotdyn.grading import answers
from cotdyn.plan.config import resolve_cells, study_protocols
from cotdyn.plan.load import load_plan
from cotdyn.provenance.integrity import EXTRA, MATCH, MISMATCH, MISSING
from cotdyn.provenance.manifests import file_sha256, output_hashes
from cotdyn.provenance.seal import seal_path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_SEAL = "cells/sim-gsm8k/registered/seal.json"


def dag_outputs(config: Path, workdir: Path) -> tuple[dict, set[str]]:
    """(the config as the workflow filled it, every file the jobs of `snakemake -n --forceall
    --configfile config` write in the study folder, logs and report pages aside)."""
    from inprocess import _dag
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings

    here = Path.cwd()
    os.chdir(workdir)
    try:
        with SnakemakeApi(OutputSettings()) as api:
            workflow = _dag(api, config.resolve(), workdir.resolve(), forceall=True)
            study = workdir.resolve() / "results" / workflow.config["study"]
            paths = {Path(p).resolve() for job in workflow.dag.jobs for p in job.output}
            filled = json.loads(json.dumps(workflow.config))
    finally:
        os.chdir(here)
    written = {p.relative_to(study).as_posix() for p in paths if p.is_relative_to(study)}
    return filled, {p for p in written if p.split("/")[0] not in ("logs", "report")}


def every_rule_config(tmp_path: Path) -> Path:
    """config/simulated-interventions.yaml (eight cells, two benchmarks, three variants, seed 002
    Figure 4) with a variant reusing another's samples and seed 000 on the study's own traces."""
    config = yaml.safe_load((ROOT / "config" / "simulated-interventions.yaml").read_text())
    config["plan"] = str(ROOT / config["plan"])
    config["cache"] = str(tmp_path / "cache")
    for benchmark in config["benchmarks"].values():
        benchmark["path"] = str(ROOT / benchmark["path"])
    config["variants"] |= {"m4": {"subsample_of": "sampled", "m": 4}, "steps": {"checkpoints": "steps"}}
    config["infogain"] = {"traces": {"seed": 0, "variant": "steps", "supervisor": {"id": str(tmp_path)}}}
    (path := tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("which", ["every optional rule", "the small simulated study"])
def test_the_expected_files_are_the_files_the_dag_writes(tmp_path, which):
    """expected_files from a config and its plan is the set of outputs of the workflow's own DAG."""
    from test_workflow import _write, small_study_config

    path = (
        every_rule_config(tmp_path)
        if which == "every optional rule"
        else _write(tmp_path, small_study_config(tmp_path))
    )
    config, written = dag_outputs(path, tmp_path)
    plan = load_plan(config["plan"])
    expected = expected_files(config, plan, resolve_cells(config, plan), study_protocols(config, plan))
    assert set(expected) == written, (sorted(set(expected) - written), sorted(written - set(expected)))


@pytest.mark.parametrize("extras", [[], ["sweeps", "math_shepherd"]])
def test_a_config_makes_the_extras_it_asks_for_and_the_audit_expects_those(tmp_path, extras):
    """``extras`` (cotdyn.files.layout.EXTRAS): [] plans the registered study alone, as the embedded
    default does; the audit's expected files follow the config, not a fixed list."""
    from test_workflow import _write, small_study_config

    config = small_study_config(tmp_path) | {"extras": extras}
    filled, written = dag_outputs(_write(tmp_path, config), tmp_path)
    plan = load_plan(filled["plan"])
    expected = expected_files(filled, plan, resolve_cells(filled, plan), study_protocols(filled, plan))
    assert set(expected) == written, (sorted(set(expected) - written), sorted(written - set(expected)))
    made = {extra for extra in ("dynamics", "exploratory", "math_shepherd", "sweeps", "secondary")
            if any(f"/{extra}" in f"/{path}" for path in written)}  # fmt: skip
    assert made == set(extras)
    assert {"analysis/registered/hypotheses.json", "analysis/registered/verdicts_table.csv"} <= written


def test_a_config_without_extras_makes_them_all_and_figure_4_brings_the_dynamics():
    from cotdyn.files.layout import EXTRAS, study_extras

    assert study_extras({}) == set(EXTRAS)
    assert study_extras({"extras": []}) == set()
    assert study_extras({"extras": ["sweeps"], "dynamics_comparisons": {"default_variant": "x"}}) == {
        "sweeps",
        "dynamics",
    }


def test_the_embedded_default_makes_the_registered_study_only():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert config["extras"] == []


def test_generation_writes_the_records_contract(small_simulated_study):
    """The raw tables generation wrote hold the contract's columns in its order."""
    study = small_simulated_study.root / "results" / "t"
    samples = pd.read_parquet(study / SAMPLES)
    chains = pd.read_parquet(next((study / "cells/sim-gsm8k/reference").glob("*/chains.parquet")))
    assert list(samples.columns) == list(SAMPLES_COLUMNS) and list(chains.columns) == list(CHAINS_COLUMNS)
    assert set(RAW_CONTRACTS) == {"samples.parquet", "chains.parquet"}


# --- the findings --------------------------------------------------------------------------------


@pytest.fixture
def study(small_simulated_study, tmp_path) -> Path:
    return copied_study(small_simulated_study, tmp_path)[0]


@pytest.fixture
def with_cache(small_simulated_study, tmp_path) -> tuple[Path, Path]:
    """(a copy of the study, a copy of its generation cache)."""
    study, outside = copied_study(small_simulated_study, tmp_path)
    return study, outside / "cache"


def manifest_of(study: Path) -> dict:
    return json.loads((study / MANIFEST).read_text())


def write_manifest(study: Path, manifest: dict) -> None:
    (study / MANIFEST).write_text(json.dumps(manifest))


def unlist(study: Path, *paths: str) -> None:
    manifest = manifest_of(study)
    for path in paths:
        del manifest["files"][path]
    write_manifest(study, manifest)


def reseal(study: Path, rel: str) -> None:
    """The raw file's seal rewritten to its bytes (hash, size, rows), as a forger would."""
    seal = json.loads(seal_path(study / rel).read_text())
    seal.update(sha256=file_sha256(study / rel), bytes=(study / rel).stat().st_size)
    seal["rows"] = len(pd.read_parquet(study / rel))
    seal_path(study / rel).write_text(json.dumps(seal))


def rederive_into(study: Path, scratch: Path) -> None:
    """Every derived file replaced by the audit's own re-derivation (the project's rules, as a
    forger reruns them), and the manifest's hashes rewritten to what the study now holds."""
    audit(study, scratch=scratch, pages=False)
    derived = scratch / "derived"
    for path in derived.rglob("*"):
        rel = path.relative_to(derived).as_posix()
        if path.is_file() and (study / rel).exists():
            (study / rel).write_bytes(path.read_bytes())
    manifest = manifest_of(study)
    stored = output_hashes(study)
    manifest["files"] = {p: stored[p] for p in manifest["files"] if p in stored}
    write_manifest(study, manifest)


def status(report, path: str):
    return next(f for f in report.files if f.path == path)


def test_continuations_forged_to_the_gold_with_their_entries_unlisted_fail(with_cache, tmp_path):
    """Every ok continuation rewritten to answer its gold, its seal re-hashed, the study re-derived
    by the project's own rules, and the samples' and seal's entries deleted from the manifest: the
    audit said PASS on d9a9ee3 beside "unlisted ... rows differ from the cache"."""
    study, cache = with_cache
    samples = pd.read_parquet(study / SAMPLES)
    golds = pd.read_parquet(study / "problems/gsm8k.parquet").set_index("problem_id")["gold"]
    ok = samples["status"] == answers.OK
    samples.loc[ok, "text"] = [f"The answer is {golds[p]}." for p in samples.loc[ok, "problem_id"]]
    found = [answers.extract(t, "gsm8k") for t in samples.loc[ok, "text"]]
    samples.loc[ok, "answer"], samples.loc[ok, "status"] = [f.answer for f in found], [f.status for f in found]
    samples.to_parquet(study / SAMPLES, index=False)
    reseal(study, SAMPLES)
    rederive_into(study, tmp_path / "forger")
    unlist(study, SAMPLES, SAMPLES_SEAL)
    report = audit(study, cache=cache, pages=False)
    assert not report.ok
    for path in (SAMPLES, SAMPLES_SEAL):
        check = status(report, path)
        assert check.status == MISSING and "not in the manifest; rule continuations writes it" in check.detail
    assert "differ from the cache" in status(report, SAMPLES).detail, status(report, SAMPLES).detail


def test_a_clean_study_with_its_raw_files_unlisted_fails(study):
    chains = sorted(p for p in manifest_of(study)["files"] if p.endswith("chains.parquet"))
    raw = [p for p in manifest_of(study)["files"] if p.endswith(("samples.parquet", "chains.parquet", "seal.json"))]
    unlist(study, *raw)
    report = audit(study, pages=False)
    assert not report.ok
    assert {f.path for f in report.failures} == set(raw), report.text()
    assert status(report, chains[0]).detail.startswith("not in the manifest; rule reference writes it")


def test_a_deleted_raw_file_and_its_entry_fail(study):
    unlist(study, SAMPLES, SAMPLES_SEAL)
    (study / SAMPLES).unlink()
    (study / SAMPLES_SEAL).unlink()
    report = audit(study, pages=False)
    for path in (SAMPLES, SAMPLES_SEAL):
        check = status(report, path)
        assert check.status == MISSING and "absent from the study; rule continuations writes it" in check.detail


@pytest.mark.parametrize("listed", [True, False], ids=["listed", "unlisted"])
def test_a_file_no_rule_writes_fails_where_the_audit_vouches(study, listed):
    for rel in ("cells/sim-gsm8k/registered/notes.parquet", "analysis/registered/extra.csv", "checks/more.json"):
        (study / rel).write_text("not written by the workflow\n")
        if listed:
            manifest = manifest_of(study)
            manifest["files"][rel] = file_sha256(study / rel)
            write_manifest(study, manifest)
    (study / "infogain").mkdir()
    (study / "infogain" / "notes.txt").write_text("outside the folders the audit vouches for\n")
    report = audit(study, pages=False)
    assert {f.path for f in report.failures} == {
        "cells/sim-gsm8k/registered/notes.parquet",
        "analysis/registered/extra.csv",
        "checks/more.json",
    }, report.text()
    assert all(f.status == EXTRA and "no rule writes it for this config" in f.detail for f in report.failures)
    assert status(report, "infogain/notes.txt").status != MISMATCH


def resealed_samples(study: Path, change) -> None:
    """A samples file with its layout changed, re-sealed and re-hashed in the manifest."""
    samples = pd.read_parquet(study / SAMPLES)
    change(samples)
    samples.to_parquet(study / SAMPLES, index=False)
    reseal(study, SAMPLES)
    manifest = manifest_of(study)
    for rel in (SAMPLES, SAMPLES_SEAL):
        manifest["files"][rel] = file_sha256(study / rel)
    write_manifest(study, manifest)


LAYOUTS = [
    ("prefix as strings", lambda t: t.__setitem__("prefix", t["prefix"].astype(str)),
     "column prefix of type large_string, not int"),
    ("an extra correct column", lambda t: t.__setitem__("correct", True), "an extra column correct"),
    ("a column dropped", lambda t: t.pop("hit_budget"), "no column hit_budget"),
    ("seeds as floats", lambda t: t.__setitem__("seed", t["seed"].astype(float)), "column seed of type double"),
]  # fmt: skip


@pytest.mark.parametrize("name,change,expected", LAYOUTS, ids=[c[0] for c in LAYOUTS])
def test_a_raw_file_with_a_changed_layout_fails_though_resealed(study, name, change, expected):
    resealed_samples(study, change)
    report = audit(study, pages=False)
    check = status(report, SAMPLES)
    assert check.status == MISMATCH and "breaks the records contract of samples.parquet" in check.detail
    assert expected in check.detail, check.detail


def test_a_duplicated_column_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cotdyn.audit.bounds import contract_problem

    names = list(SAMPLES_COLUMNS) + ["text"]
    arrays = [pa.array([], pa.string()) for _ in names]
    pq.write_table(pa.Table.from_arrays(arrays, names=names), path := tmp_path / "samples.parquet")
    problem = contract_problem(path, SAMPLES_COLUMNS)
    assert problem and "column text 2 times" in problem, problem


def test_an_untouched_study_passes_with_every_expected_file_matching(study):
    report = audit(study, pages=False)
    assert report.ok, report.text()[:3000]
    assert status(report, SAMPLES).status == MATCH and status(report, SAMPLES_SEAL).status == MATCH
