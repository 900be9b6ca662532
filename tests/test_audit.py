"""Provenance manifests and the reviewer's audit (docs/reference.md section 7), on small simulated studies.

A study is built the way the workflow builds one (the same cotdyn functions its rules call, the
same layout) over the first 100 GSM8K problems, then tampered with in the ways a reviewer must
catch: each tamper is detected, and the message names what changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from factories import without_assumed_effects

from cotdyn.audit.check import MATCH, MISMATCH, MISSING, PLAN_CHECK, audit, derive_analysis, write_plan_check
from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.files.writers import write_parquet
from cotdyn.generation.run import run_continuations, run_reference
from cotdyn.generation.sealing import seal_chains, seal_samples
from cotdyn.plan.config import protocol_for, reference_id, resolve_cells
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import PreregistrationError, register
from cotdyn.provenance.manifests import (
    STUDY_MANIFEST,
    canonical_json,
    config_sha256,
    fill_config_defaults,
    output_hashes,
    write_cell_manifest,
    write_study_manifest,
)
from cotdyn.records.derive import derive_records
from cotdyn.records.export import write_samples_jsonl

ROOT = Path(__file__).resolve().parents[1]
CELL = "qwen7b-gsm8k"
RECORDS = f"cells/{CELL}/registered/records.parquet"
SAMPLES = f"cells/{CELL}/registered/samples.parquet"
DEVIATION = {
    "cell": CELL,
    "parameter": "reference_temperature",
    "registered": 0.7,
    "used": 0.6,
    "reason": "test: a declared deviation",
}


def build_study(
    root: Path, data: Path, protocol: dict, deviations: list[dict], registration=None, extras: bool = True
) -> Path:
    """A one-cell confirmatory study under root/results/t, built by the workflow's steps in order.
    ``registration(plan_path, registered_path)``: how its plan is registered (default: an author's date);
    ``extras``: every extra (a config without ``extras``) or the registered study only (``extras: []``)."""
    prereg = root / "preregistration"
    prereg.mkdir(parents=True)
    # Fewer bootstrap resamples than registered keep the tests fast; the copy is registered afresh.
    text = without_assumed_effects((ROOT / "preregistration" / "plan.yaml").read_text())
    for registered, small in (("resamples: 1000", "resamples: 100"),):
        assert registered in text
        text = text.replace(registered, small)
    (prereg / "plan.yaml").write_text(text)
    (registration or (lambda plan, registered: register(plan, registered, "2026-11-30")))(
        prereg / "plan.yaml", prereg / "REGISTERED"
    )
    (prereg / "deviations.yaml").write_text(yaml.safe_dump(deviations))
    plan_path = prereg / "plan.yaml"
    from cotdyn.generation.backends.registry import schema_file

    with schema_file(ROOT / "src" / "cotdyn" / "plan" / "config.schema.yaml") as schema:
        config = fill_config_defaults(
            {
                "study": "t",
                "plan": str(plan_path),
                "cache": str(root / "cache"),
                "cells": [CELL],
                "confirmatory": [CELL],
                "protocol": protocol,
                "models": {"qwen7b": {"backend": "simulated"}},
                "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(data / "gsm8k_test.jsonl"), "limit": 100}},
                **({} if extras else {"extras": []}),
            },
            schema,
        )
    plan = load_plan(plan_path)
    study = root / "results" / "t"
    write_plan_check(plan_path, config, study / PLAN_CHECK)  # head of the DAG: may refuse
    spec = resolve_cells(config, plan)[CELL]
    protocol_used = protocol_for(config, plan, "registered")
    problems = study / "problems" / "gsm8k.parquet"
    write_parquet(problems_table(load_benchmark(spec.benchmark)), problems)
    ref = study / "cells" / CELL / "reference" / reference_id(protocol_used)
    cell_dir = study / "cells" / CELL / "registered"
    model = dict(spec.model)
    run_reference(
        problems, model, protocol_used, CELL, "gsm8k", config["cache"], ref / "chains.parquet", ref / "generation.json"
    )
    run_continuations(
        problems,
        ref / "chains.parquet",
        model,
        protocol_used,
        CELL,
        "gsm8k",
        config["cache"],
        cell_dir / "samples.parquet",
        cell_dir / "generation.json",
    )
    # the seals the generation rules write (workflow/scripts/reference.py, continuations.py)
    seal_chains(ref / "chains.parquet", ref / "generation.json", protocol_used, CELL)
    seal_samples(
        cell_dir / "samples.parquet", ref / "chains.parquet", cell_dir / "generation.json", protocol_used, CELL
    )
    write_samples_jsonl(cell_dir / "samples.parquet", cell_dir / "samples.jsonl")  # rule samples_jsonl
    derive_records(
        ref / "chains.parquet",
        cell_dir / "samples.parquet",
        protocol_used,
        plan["exclusion"],
        "gsm8k",
        CELL,
        cell_dir / "records.parquet",
        cell_dir / "summary.json",
    )
    derive_analysis([cell_dir / "records.parquet"], plan_path, study / PLAN_CHECK, study / "analysis" / "registered")
    if extras:
        derive_further_analyses(study, cell_dir, plan, protocol_used)
        write_hash_checked_outputs(study, ref / "chains.parquet", cell_dir, plan, protocol_used)
    generation = {"registered": cell_dir / "generation.json", f"reference/{ref.name}": ref / "generation.json"}
    write_cell_manifest(
        spec,
        {"registered": protocol_used},
        generation,
        problems,
        plan_path,
        config,
        study / PLAN_CHECK,
        study / "manifest" / "cells" / f"{CELL}.json",
        root=ROOT,
    )
    (study / "logs").mkdir()
    (study / "logs" / "run.log").write_text("logs are not outputs\n")
    write_study_manifest(study, "t", config, plan_path, root=ROOT)
    return study


def derive_further_analyses(study: Path, cell_dir: Path, plan: dict, protocol: dict) -> None:
    """Seed 003's further analyses and seed 002's dynamics, as rules secondary, generations and
    dynamics write them (the audit re-derives them)."""
    from cotdyn.records.table import variant_samples
    from cotdyn.report.dynamics_plots import write_dynamics
    from cotdyn.report.secondary_tables import derive_generations, derive_secondary

    records, hypotheses = [cell_dir / "records.parquet"], [study / "analysis" / "registered" / "hypotheses.json"]
    secondary = study / "analysis" / "registered" / "secondary"
    derive_secondary(records, hypotheses[0], plan, float(protocol["epsilon"]), secondary)
    derive_generations(records, hypotheses, {"registered": protocol}, plan, study / "analysis" / "generations")
    chains = pd.read_parquet(study / "cells" / CELL / "reference" / reference_id(protocol) / "chains.parquet")
    write_dynamics(
        variant_samples(pd.read_parquet(cell_dir / "samples.parquet"), chains, protocol).assign(cell=CELL),
        pd.read_parquet(records[0]),
        study / "analysis" / "registered" / "dynamics",
        null_class=protocol["null_answers"] == "class",
        benchmarks={CELL: "gsm8k"},
        equivalence=protocol["equivalence"],
        endpoint=protocol["endpoint"],
    )


def write_hash_checked_outputs(study: Path, chains: Path, cell_dir: Path, plan: dict, protocol: dict) -> None:
    """The exploratory tables, Math-Shepherd labels and sweeps, written by the functions their rules
    call (the audit re-derives them with the same, since issue 52 item 3)."""
    from cotdyn.audit.derive_outputs import derive_exploratory
    from cotdyn.methods.math_shepherd import math_shepherd_csv
    from cotdyn.records.table import variant_samples
    from cotdyn.report.exploratory_tables import derive_sweeps

    analysis, records = study / "analysis" / "registered", [cell_dir / "records.parquet"]
    derive_exploratory(records, protocol, plan, analysis / "exploratory")
    stored = pd.read_parquet(chains)
    samples = variant_samples(pd.read_parquet(cell_dir / "samples.parquet"), stored, protocol)
    labels = math_shepherd_csv([(CELL, "gsm8k", samples, stored, pd.read_parquet(records[0]))], protocol)
    (analysis / "math_shepherd.csv").write_text(labels)
    boot = plan["analysis"]["bootstrap"]
    derive_sweeps([cell_dir / "summary.json"], records, "registered", seed=int(boot["seed"]),
                  resamples=int(boot["resamples"]), level=float(boot["level"]),
                  out_csv=study / "analysis" / "sweeps.csv", out_html=study / "analysis" / "sweeps.html")  # fmt: skip


@pytest.fixture(scope="module")
def registered_study(tmp_path_factory, data_dir) -> Path:
    return build_study(tmp_path_factory.mktemp("registered"), data_dir, {}, [])


@pytest.fixture
def study(registered_study, tmp_path) -> Path:
    """A private copy of the registered study to tamper with (``copy_study``)."""
    return copy_study(registered_study, tmp_path)


def copy_study(registered_study: Path, tmp_path: Path) -> Path:
    """A copy of a study built by ``build_study`` (with its preregistration/ and its cache, beside its
    results/ as a reviewer receives them: the audit opens only what lies there)."""
    root = registered_study.parents[1]
    shutil.copytree(root / "preregistration", tmp_path / "preregistration")
    shutil.copytree(root / "cache", tmp_path / "cache")
    copy = tmp_path / "results" / "t"
    shutil.copytree(registered_study, copy)
    manifest = json.loads((copy / STUDY_MANIFEST).read_text())
    manifest["config"]["plan"] = str(tmp_path / "preregistration" / "plan.yaml")
    manifest["config"]["cache"] = str(tmp_path / "cache")
    manifest["config_sha256"] = config_sha256(manifest["config"])
    (copy / STUDY_MANIFEST).write_text(json.dumps(manifest))
    return copy


def status(report, path: str):
    return next(f for f in report.files if f.path == path)


def test_untouched_study_passes_twice(registered_study):
    first, second = audit(registered_study), audit(registered_study)
    assert first.ok and second.ok, first.text()
    assert first.as_dict() == second.as_dict()
    derived = {f.path for f in first.files if f.detail == "re-derived"}
    assert {
        RECORDS,
        f"cells/{CELL}/registered/summary.json",
        PLAN_CHECK,
        "analysis/registered/hypotheses.json",
        "analysis/registered/forest_gaps.png",
        "analysis/registered/secondary/selective_accuracy.csv",
        "analysis/registered/secondary/descriptive_family.csv",
        "analysis/generations/budget_probe.csv",
        "analysis/registered/dynamics/profiles.csv",
        "analysis/registered/dynamics/mechanism_shares.csv",
        "analysis/registered/dynamics/mechanism_shares.png",
        # issue 52 item 3: what was hash-checked only
        "analysis/registered/exploratory/tables.html",
        "analysis/registered/exploratory/risk_coverage.png",
        "analysis/registered/math_shepherd.csv",
        "analysis/sweeps.csv",
        "analysis/sweeps.html",
    } <= derived
    assert all(f.status == MATCH for f in first.files)


def test_manifests_record_provenance(registered_study):
    study = registered_study
    manifest = json.loads((study / STUDY_MANIFEST).read_text())
    assert manifest["files"] == output_hashes(study)
    assert "logs/run.log" not in manifest["files"] and STUDY_MANIFEST not in manifest["files"]
    assert f"manifest/cells/{CELL}.json" in manifest["files"]
    import hashlib

    assert manifest["config_sha256"] == hashlib.sha256(canonical_json(manifest["config"])).hexdigest()
    assert manifest["config"]["variants"] == {"registered": {}}  # schema defaults filled before hashing
    cell = json.loads((study / "manifest" / "cells" / f"{CELL}.json").read_text())
    assert cell["plan_sha256"] == plan_sha256(manifest["config"]["plan"])
    assert cell["config_sha256"] == manifest["config_sha256"]
    assert cell["dataset"]["id"] == "openai/gsm8k" and len(cell["dataset"]["content_sha256"]) == 64
    generations = sorted((study / "cells" / CELL).rglob("generation.json"))
    logs = [json.loads(p.read_text()) for p in generations]
    assert sorted(cell["effective_sampling"].values(), key=str) == sorted(
        (g["effective_sampling"] for g in logs), key=str
    )
    assert cell["totals"]["generated_tokens"] == sum(g["generated_tokens"] for g in logs) > 0
    assert cell["seeds"] == {"registered": 20260829}
    assert cell["model"]["revision"] == logs[0]["backend"]["revision"]
    assert "vllm" in cell["packages"] and cell["packages"]["pandas"] == pd.__version__
    assert {"platform", "cuda_device"} <= set(cell["hardware"]) and set(cell["git"]) == {"commit", "dirty"}


def test_edited_plan_is_detected(study):
    plan = study.parents[1] / "preregistration" / "plan.yaml"
    before = plan_sha256(plan)
    plan.write_text(plan.read_text().replace("epsilon: 0.01", "epsilon: 0.02"))
    report = audit(study)
    assert not report.ok
    assert any(before in p and plan_sha256(plan) in p for p in report.problems), report.problems


def test_changed_records_value_is_detected(study):
    records = pd.read_parquet(study / RECORDS)
    records.loc[0, "correct"] = not records.loc[0, "correct"]
    records.to_parquet(study / RECORDS, index=False)
    report = audit(study)
    assert not report.ok
    check = status(report, RECORDS)
    assert check.status == MISMATCH and "stored sha256" in check.detail
    # the detail names the row and the column that changed, not only the hash
    assert f"1 of {len(records)} rows changed: cell={CELL}, problem_id={records.loc[0, 'problem_id']} (correct)" in (
        check.detail
    )
    assert [f.path for f in report.failures] == [RECORDS]


def test_a_rewritten_mechanism_table_is_caught_by_its_rederivation(study):
    """The dynamics tables are re-derived (issue 24): a mechanism table rewritten together with its
    manifest hash passes the stored check and fails the re-derivation."""
    from cotdyn.provenance.manifests import file_sha256

    path = "analysis/registered/dynamics/mechanism_shares.csv"
    shares = pd.read_csv(study / path)
    shares["endpoint_note"] = None  # the endpoint note dropped
    shares.to_csv(study / path, index=False)
    manifest = json.loads((study / STUDY_MANIFEST).read_text())
    manifest["files"][path] = file_sha256(study / path)
    (study / STUDY_MANIFEST).write_text(json.dumps(manifest))
    check = status(audit(study), path)
    assert check.status == MISMATCH and check.detail.startswith("re-derived from samples and chains")


def test_deleted_output_is_detected(study):
    (study / "analysis" / "registered" / "h2_table.csv").unlink()
    report = audit(study)
    assert not report.ok
    assert [(f.path, f.status) for f in report.failures] == [("analysis/registered/h2_table.csv", MISSING)]


def test_changed_continuation_text_is_detected(study):
    samples = pd.read_parquet(study / SAMPLES)
    # Every continuation of the first problem's first prefix now ends in a new answer: the
    # re-extracted answers, and so the re-derived trajectory, differ from what was recorded.
    rows = (samples["problem_id"] == samples["problem_id"].iloc[0]) & (samples["prefix"] == 0)
    samples.loc[rows, "text"] = "Continuing from here, the final answer is 123456789."
    samples.to_parquet(study / SAMPLES, index=False)
    report = audit(study)
    assert not report.ok
    assert status(report, SAMPLES).status == MISMATCH
    records = status(report, RECORDS)
    assert records.status == MISMATCH and "re-derived from samples and chains" in records.detail
    assert any(SAMPLES in p and "differ from the answers extracted" in p for p in report.problems)
    # the problem names the samples whose stored answer no longer follows from their text
    first = samples["problem_id"].iloc[0]
    assert any(f"problem_id={first}, prefix=0, sample=0 (stored" in p for p in report.problems), report.problems


def test_the_audit_finds_a_relative_plan_from_any_folder(study, tmp_path, monkeypatch):
    """`cotdyn audit DIR` from another folder: the config's relative plan path is looked up above the
    study (results/<study> lies in the workflow's folder), never a FileNotFoundError."""
    manifest = json.loads((study / STUDY_MANIFEST).read_text())
    manifest["config"]["plan"] = "preregistration/plan.yaml"  # relative, as a config names it
    manifest["config_sha256"] = config_sha256(manifest["config"])
    (study / STUDY_MANIFEST).write_text(json.dumps(manifest))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    report = audit(study)
    assert report.ok, report.text()
    (study.parents[1] / "preregistration" / "plan.yaml").rename(study.parents[1] / "plan.moved")
    report = audit(study)
    assert not report.ok and "plan preregistration/plan.yaml not found" in report.problems[0]
    assert "--plan" in report.problems[0]


def test_undeclared_deviation_stops_the_study(tmp_path, data_dir):
    with pytest.raises(PreregistrationError) as e:
        build_study(tmp_path, data_dir, {"reference_temperature": 0.6}, [])
    message = str(e.value)
    assert all(s in message for s in (CELL, "reference_temperature", "0.6", "0.7"))
    assert not (tmp_path / "results" / "t" / "cells").exists()  # refused before any generation


@pytest.mark.slow
def test_declared_deviation_runs_and_is_reported(tmp_path, data_dir):
    study = build_study(tmp_path, data_dir, {"reference_temperature": 0.6}, [DEVIATION])
    (reference,) = (study / "cells" / CELL / "reference").glob("t0.6-b600-s20260829-*")
    assert (reference / "chains.parquet").exists()
    check = json.loads((study / PLAN_CHECK).read_text())
    assert check["cells"][CELL]["deviations"] == [DEVIATION]
    hypotheses = json.loads((study / "analysis" / "registered" / "hypotheses.json").read_text())
    assert hypotheses["preregistration"]["cells"][CELL]["deviations"] == [DEVIATION]
    assert hypotheses["plan_sha256"] == plan_sha256(tmp_path / "preregistration" / "plan.yaml")
    manifest = json.loads((study / "manifest" / "cells" / f"{CELL}.json").read_text())
    assert manifest["plan_check"]["deviations"] == [DEVIATION]
    assert manifest["effective_sampling"][f"reference/{reference.name}"]["temperature"] == 0.6
    assert audit(study).ok
    # Withdrawing the declaration afterwards: the audit names the now-undeclared deviation.
    (tmp_path / "preregistration" / "deviations.yaml").write_text("[]\n")
    report = audit(study)
    assert not report.ok
    assert any("undeclared deviation" in p and "reference_temperature" in p and CELL in p for p in report.problems)
    # The plan check no longer re-derives, and neither does the analysis that names its deviations.
    assert status(report, PLAN_CHECK).status == MISSING
    assert status(report, "analysis/registered/hypotheses.json").status == MISSING


def test_outputs_the_audit_does_not_rederive_are_hash_checked_not_failed():
    from cotdyn.audit.check import MATCH, MISMATCH, compare_files, is_derived

    assert is_derived("analysis/registered/hypotheses.json")
    assert is_derived("analysis/registered/dynamics/mechanism_shares.csv")  # re-derived since issue 24
    # re-derived since issue 52 item 3: the exploratory tables, sweeps and Math-Shepherd labels
    assert is_derived("analysis/registered/exploratory/tables.html") and is_derived("analysis/sweeps.csv")
    assert is_derived("analysis/registered/math_shepherd.csv")
    assert not is_derived("infogain/traces/ig_table.csv")  # a LoRA supervisor per cell: hash-checked only
    listed = {"infogain/traces/ig_table.csv": "a", "infogain/traces/detection_table.csv": "b"}
    changed = {**listed, "infogain/traces/detection_table.csv": "x"}
    checks = {c.path: c.status for c in compare_files(listed, changed, {})}
    assert checks == {"infogain/traces/ig_table.csv": MATCH, "infogain/traces/detection_table.csv": MISMATCH}


def test_a_study_output_missing_from_the_manifest_fails_the_audit(study):
    """The audit expects every study target (cotdyn.files.layout.study_targets) in the manifest."""
    manifest = json.loads((study / STUDY_MANIFEST).read_text())
    del manifest["files"]["analysis/registered/math_shepherd.csv"]
    (study / STUDY_MANIFEST).write_text(json.dumps(manifest))
    (study / "analysis/registered/math_shepherd.csv").unlink()
    report = audit(study)
    assert not report.ok
    # one line for it, the expected files' (issue 52: unlisted_targets merged into that check)
    check = status(report, "analysis/registered/math_shepherd.csv")
    assert check.status == MISSING and "rule math_shepherd writes it" in check.detail, check
    assert not any("math_shepherd.csv" in p for p in report.problems)


def forge(study: Path, path: str, samples: pd.DataFrame) -> None:
    """Write forged samples the way a careful forger would: the manifest entry and the seal re-hashed."""
    from cotdyn.provenance.manifests import file_sha256
    from cotdyn.provenance.seal import seal_path

    samples.to_parquet(study / path, index=False)
    manifest = json.loads((study / STUDY_MANIFEST).read_text())
    manifest["files"][path] = file_sha256(study / path)
    seal = json.loads(seal_path(study / path).read_text())
    seal["sha256"], seal["bytes"] = file_sha256(study / path), (study / path).stat().st_size
    seal_path(study / path).write_text(json.dumps(seal))
    manifest["files"][str(seal_path(path))] = file_sha256(seal_path(study / path))
    (study / STUDY_MANIFEST).write_text(json.dumps(manifest))


def test_a_forged_sample_rehashed_everywhere_fails_against_the_cache(study):
    """Text and answer of one continuation changed together (so its re-extracted answer agrees), the
    manifest and the seal re-hashed: only the cache can tell, and it does."""
    samples = pd.read_parquet(study / SAMPLES)
    row = samples.index[samples["answer"].notna()][0]
    answer = samples.at[row, "answer"]
    samples.at[row, "text"] = samples.at[row, "text"].replace(answer, answer + "1")
    samples.at[row, "answer"] = answer + "1"
    forge(study, SAMPLES, samples)
    report = audit(study)
    assert not report.ok
    check = status(report, SAMPLES)
    assert check.status == MISMATCH and "1 rows differ from the cache" in check.detail, check.detail


def test_a_one_byte_flip_in_a_text_fails_against_the_cache(study):
    samples = pd.read_parquet(study / SAMPLES)
    text = samples.at[7, "text"]
    samples.at[7, "text"] = text[:3] + chr(ord(text[3]) ^ 1) + text[4:]
    forge(study, SAMPLES, samples)
    check = status(audit(study), SAMPLES)
    assert check.status == MISMATCH and "differ from the cache" in check.detail, check.detail


@pytest.mark.parametrize(
    "cached, found",
    [
        (((1, 2, 70000), "ab", "stop"), None),
        (((1, 2, 70001), "ab", "stop"), "text or token ids differ"),
        (((1, 2), "ab", "stop"), "text or token ids differ"),
        (((1, 2, 70000), "ab ", "stop"), "text or token ids differ"),
        (((1, 2, 70000), None, "stop"), "text or token ids differ"),
        (((1, 2, 70000), "ab", "length"), "finish_reason differs"),
        (((1, 2.0, 70000), "ab", "stop"), TypeError),
        (((1, "2", 70000), "ab", "stop"), TypeError),
        (((1, 2**64, 70000), "ab", "stop"), ValueError),
    ],
)
def test_a_row_is_compared_with_its_cached_completion_through_its_digest(cached, found):
    """The audit holds each row, and each cached completion, as a digest of its ids and text
    (cotdyn.audit.cache_rows): every change to the cached ids, text or finish reason is still told,
    and ids that are no int64 integers make the file unreadable rather than equal."""
    import numpy as np

    from cotdyn.audit.cache_rows import cached_row, content_digest
    from cotdyn.audit.raw import Pending, row_differences

    row = (content_digest(np.asarray([1, 2, 70000], dtype=np.int64).tobytes(), "ab"), "stop")
    file = Pending(Path("cache"), [row], [("k" * 64, 1)], [0, 1], {"k" * 64: [0]}, [])
    if isinstance(found, type):
        with pytest.raises(found):
            row_differences(file, 0, "k" * 64, [cached_row(*cached)])
        return
    differences = row_differences(file, 0, "k" * 64, [cached_row(*cached)])
    assert differences == ([] if found is None else [f"request kkkkkkkkkkkk sample 0: {found} from the cache"])


def test_an_untouched_study_is_compared_row_by_row_with_the_cache(registered_study):
    report = audit(registered_study)
    for path in (SAMPLES, next(f.path for f in report.files if f.path.endswith("chains.parquet"))):
        assert status(report, path).detail == "sealed, and every row equal to the generation cache"


def test_a_study_without_its_cache_is_checked_against_its_seals_only(study):
    manifest = json.loads((study / STUDY_MANIFEST).read_text())
    manifest["config"]["cache"] = str(study / "no-such-cache")
    manifest["config_sha256"] = config_sha256(manifest["config"])
    (study / STUDY_MANIFEST).write_text(json.dumps(manifest))
    check = status(audit(study), SAMPLES)
    assert check.status == MATCH and "absent, rows not compared" in check.detail
    # a forged file with its seal left alone still fails
    samples = pd.read_parquet(study / SAMPLES)
    samples.at[0, "text"] = samples.at[0, "text"] + " "
    samples.to_parquet(study / SAMPLES, index=False)
    manifest["files"][SAMPLES] = output_hashes(study)[SAMPLES]
    (study / STUDY_MANIFEST).write_text(json.dumps(manifest))
    check = status(audit(study), SAMPLES)
    assert check.status == MISMATCH and "sha256 differs from its seal" in check.detail


def test_a_missing_seal_fails_the_audit(study):
    from cotdyn.provenance.seal import seal_path

    seal_path(study / SAMPLES).unlink()
    check = status(audit(study), SAMPLES)
    assert check.status == MISMATCH and "has no seal" in check.detail


def test_a_forged_prefix_is_caught_by_the_requests_the_seal_holds(study):
    """Rows moved to another prefix (their text untouched): the requests read back from the file no
    longer are the ones generation sealed."""
    samples = pd.read_parquet(study / SAMPLES)
    first = samples["problem_id"] == samples["problem_id"].iloc[0]
    samples.loc[first & (samples["prefix"] == 1), "prefix_tokens"] -= 1
    forge(study, SAMPLES, samples)
    check = status(audit(study), SAMPLES)
    assert check.status == MISMATCH and "1 of its requests (prompt ids, seeds, prefixes) differ" in check.detail


def test_the_manifest_loads_torch_for_its_cuda_device_only_where_a_cuda_driver_is_installed(monkeypatch):
    """Without the driver's library no device is named and torch is not imported (it costs a job
    seconds); with it, torch names the first device."""
    import ctypes.util
    import subprocess
    import sys
    from types import SimpleNamespace

    from cotdyn.provenance.manifests import cuda_device

    if ctypes.util.find_library("cuda") is None and ctypes.util.find_library("nvcuda") is None:
        probe = "import sys; from cotdyn.provenance import manifests as m; print(m.hardware()['cuda_device'], 'torch' in sys.modules)"
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert done.stdout.split() == ["None", "False"], done.stdout + done.stderr
    gpu = SimpleNamespace(is_available=lambda: True, get_device_name=lambda index: f"GPU {index}")
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=gpu))
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libcuda.so.1" if name == "cuda" else None)
    assert cuda_device() == "GPU 0"
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert cuda_device() is None
