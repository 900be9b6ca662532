"""Tamper evidence and contained inputs (issue 28, docs/tamper-evidence.md): a rerun never derives from a
forged or damaged raw file, missing files are rebuilt, no name leaves its study, bad input is refused
before any generation with its file, line and field named."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import time
from dataclasses import fields
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from snakemake.utils import validate

from cotdyn.dataset.benchmarks import BenchmarkError, load_benchmark
from cotdyn.provenance.seal import SealError, check_sealed, seal_path, write_seal

SCHEMA = ROOT / "src" / "cotdyn" / "plan" / "config.schema.yaml"
SAMPLES = "results/t/cells/sim-gsm8k/registered/samples.parquet"


def base_config() -> dict:
    from test_workflow import _simulated_config

    return _simulated_config(Path("/tmp/unused"))


@pytest.fixture(scope="module")
def schema_path():
    """The schema with the backend registry filled in (as common.smk writes it), written once for
    the module's two hundred validations."""
    from cotdyn.generation.backends.registry import schema_file

    with schema_file(SCHEMA) as path:
        yield path


def validate_config(config: dict, schema_path: str) -> None:
    """Snakemake's validate, as common.smk runs it."""
    validate(config, schema_path)


def refused(config: dict, schema_path: str) -> str:
    with pytest.raises(Exception) as e:
        validate_config(copy.deepcopy(config), schema_path)
    return str(e.value)


# --- 4. containment: one safe name pattern ---------------------------------------------------


def _with_name(where: str, name: str) -> dict:
    c = base_config()
    if where == "study":
        c["study"] = name
    elif where == "model":
        c["models"] = {name: c["models"]["sim"]}
        c["cells"] = [f"{name}-gsm8k"]
    elif where == "benchmark":
        c["benchmarks"] = {name: c["benchmarks"]["gsm8k"]}
        c["cells"] = [f"sim-{name}"]
    elif where == "cell":
        c["cells"] = [name]
    elif where == "variant":
        c["variants"] = {"registered": {}, name: {"m": 4}}
    elif where == "subsample_of":
        c["variants"] = {"registered": {}, "m4": {"m": 4, "subsample_of": name}}
    elif where == "confirmatory":
        c["confirmatory"] = [name]
    elif where == "infogain variant":
        c["infogain"] = {"traces": {"supervisor": {"id": "x"}, "variant": name}}
    return c


WHERES = ("study", "model", "benchmark", "cell", "variant", "subsample_of", "confirmatory", "infogain variant")


@pytest.mark.parametrize("where", WHERES)
@pytest.mark.parametrize("name", ["../../../../escaped", "..", "a/b", "x..y", ".hidden", "-x", "a b"])
def test_a_name_that_could_leave_its_folder_is_refused(where, name, schema_path):
    message = refused(_with_name(where, name), schema_path)
    assert "does not match" in message, message


@pytest.mark.parametrize("where", WHERES)
def test_safe_names_pass(where, schema_path):
    name = {"cell": "qwen2.5-7b-gsm8k", "benchmark": "gsm8k", "subsample_of": "registered"}.get(where, "qwen2.5_7b")
    config = _with_name(where, name)
    if where == "confirmatory":
        config["confirmatory"] = ["sim-gsm8k"]
    validate_config(config, schema_path)


@pytest.mark.slow
def test_the_workflow_refuses_an_escaping_variant_before_planning(tmp_path):
    from test_workflow import _write, snakemake

    config = _with_name("variant", "../../../../escaped")
    config["cache"] = str(tmp_path / "cache")
    result = snakemake("-n", "--configfile", str(_write(tmp_path, config)), cwd=tmp_path)
    assert result.returncode != 0 and "study.yaml" in result.output and "does not match" in result.output
    assert {p.name for p in tmp_path.iterdir()} <= {".snakemake", "study.yaml"}  # nothing written


def test_every_file_of_a_run_lands_in_its_study_cache_or_logs(small_simulated_study):
    """The shared small study's run: each file it wrote is under results/<study>/, the cache, or
    Snakemake's own .snakemake/ (its logs and metadata); only the config was there before."""
    assert small_simulated_study.run.returncode == 0
    root = small_simulated_study.root
    allowed = ("results/t/", "cache/", ".snakemake/")
    stray = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.relative_to(root).as_posix().startswith(allowed)
    ]
    assert stray == [small_simulated_study.config.name]
    # the paths it was given, resolved, are printed at the start
    assert f"cache: {root / 'cache'}" in small_simulated_study.run.output
    assert f"study: {root / 'results' / 't'}" in small_simulated_study.run.output


# --- 5. type- and range-checked overrides ----------------------------------------------------

BAD_OVERRIDES = [
    ("m", "ten"), ("m", 1), ("m", 0), ("m", 2.5), ("epsilon", -1), ("epsilon", "small"),
    ("reference_max_tokens", 0), ("continuation_max_tokens", -5), ("reference_temperature", -0.1),
    ("continuation_temperature", "hot"), ("top_p", 0), ("top_p", 1.5), ("top_k", -1),
    ("repetition_penalty", 0), ("cap", 0), ("checkpoint_stride", 0), ("seed", -1), ("seed", "x"),
    ("system_prompt", 3), ("segmentation", 7),
]  # fmt: skip


@pytest.mark.parametrize("key,value", BAD_OVERRIDES)
@pytest.mark.parametrize("level", ["protocol", "variant"])
def test_a_protocol_override_of_the_wrong_type_or_range_is_refused(key, value, level, schema_path):
    config = base_config()
    if level == "protocol":
        config["protocol"] = {key: value}
    else:
        config["variants"] = {"registered": {}, "v": {key: value}}
    message = refused(config, schema_path)
    assert f"['{key}']" in message, message


def test_the_schema_types_every_protocol_parameter_of_the_plan(plan, schema_path):
    schema = yaml.safe_load(SCHEMA.read_text())
    assert set(schema["$defs"]["protocol"]["properties"]) == set(plan["protocol"])
    config = base_config()
    config["protocol"] = dict(plan["protocol"])  # the registered values themselves pass
    validate_config(config, schema_path)


def test_the_schema_checks_every_planted_field(schema_path):
    from cotdyn.generation.backends.registry import config_schema
    from cotdyn.generation.backends.simulated import Planted

    schema = config_schema(yaml.safe_load(SCHEMA.read_text()))
    planted = schema["properties"]["models"]["additionalProperties"]["properties"]["planted"]
    assert set(planted["properties"]) == {f.name for f in fields(Planted)}
    for bad in ({"null_rat": 0.1}, {"cut_rate": 1.5}, {"unit_chars": "many"}, {"units_median": 0}):
        config = base_config()
        config["models"]["sim"]["planted"] = bad
        assert "planted" in refused(config, schema_path)


def test_a_yaml_error_in_the_plan_names_the_plan(tmp_path):
    from cotdyn.plan.load import load_plan

    plan = tmp_path / "plan.yaml"
    plan.write_text("protocol: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ValueError, match=str(plan)):
        load_plan(plan)


# --- 5. bad benchmark files, refused with file, line and field -------------------------------


def _jsonl(tmp_path, data: bytes) -> dict:
    path = tmp_path / "own.jsonl"
    path.write_bytes(data)
    return {
        "kind": "jsonl",
        "path": str(path),
        "fields": {"question": "q", "gold": "a", "id": "id"},
        "answer": "number",
    }


def row(i, q="What is 1+1?", a="2") -> bytes:
    return json.dumps({"id": i, "q": q, "a": a}).encode() + b"\n"


@pytest.mark.parametrize(
    "data,expected",
    [
        (b"", "no problems"),
        (b"\n\n", "no problems"),
        (row("p1") + b"\n" + row("p1"), "line 3, field 'id': id 'p1' repeats line 1"),
        (row("p1") + row("p1", q="Another question?"), "line 2, field 'id': id 'p1' repeats line 1"),
        (row("p1") + b'{"id": "p2", "q": "caf\xe9", "a": "1"}\n', "line 2 is not UTF-8 (byte 0xe9 at column 23)"),
        (row("p1") + b'"just a string"\n', "line 2 is a JSON str, not an object"),
        (row("p1") + b"[1, 2]\n", "line 2 is a JSON list, not an object"),
        (row("p1") + b"{not json\n", "line 2 is not JSON"),
        (b"\n" + json.dumps({"id": "p1", "q": "x"}).encode(), "line 2 has no field 'a'"),
    ],
)
def test_a_bad_benchmark_file_is_refused_naming_file_and_line(tmp_path, data, expected):
    spec = _jsonl(tmp_path, data)
    with pytest.raises(BenchmarkError) as e:
        load_benchmark(spec)
    assert str(e.value).startswith(spec["path"]) and expected in str(e.value), str(e.value)


def test_a_good_benchmark_file_still_loads(tmp_path):
    problems = load_benchmark(_jsonl(tmp_path, row("p1") + b"\n" + row("p2", q="What is 2+2?", a="4")))
    assert [(p.problem_id, p.gold) for p in problems] == [("p1", "2"), ("p2", "4")]


# --- 1. seals --------------------------------------------------------------------------------


def test_a_seal_refuses_a_changed_or_unsealed_file_and_says_how_to_restore_it(tmp_path):
    raw = tmp_path / "samples.parquet"
    pd.DataFrame({"text": ["The answer is 32."]}).to_parquet(raw)
    with pytest.raises(SealError, match="has no seal"):
        check_sealed(raw)
    write_seal(raw, "rev", [("k" * 64, 1)])
    check_sealed(raw)
    data = bytearray(raw.read_bytes())
    data[len(data) // 2] ^= 1
    raw.write_bytes(bytes(data))
    with pytest.raises(SealError) as e:
        check_sealed(raw)
    assert str(raw) in str(e.value) and f"rm {raw}" in str(e.value) and "from the generation cache" in str(e.value)
    seal = json.loads(seal_path(raw).read_text())
    seal["requests"][0][1] = 2  # a seal edited by hand no longer hashes to itself
    seal_path(raw).write_text(json.dumps(seal))
    with pytest.raises(SealError, match="damaged seal"):
        check_sealed(raw)
    check_sealed(tmp_path / "not-yet-generated.parquet")  # the workflow generates it


def test_a_symlink_inside_a_study_is_refused_by_the_manifest(tmp_path):
    from cotdyn.provenance.manifests import ManifestError, output_hashes

    study, elsewhere = tmp_path / "t", tmp_path / "elsewhere"
    (elsewhere / "c").mkdir(parents=True)
    (elsewhere / "c" / "summary.json").write_text("{}")
    study.mkdir()
    (study / "cells").symlink_to(elsewhere)
    with pytest.raises(ManifestError, match=f"{study / 'cells'} is a symlink"):
        output_hashes(study)


# --- 6. stale cache temporaries --------------------------------------------------------------


def test_stale_cache_temporaries_are_removed_and_live_ones_kept(tmp_path):
    import socket

    from cotdyn.generation.cache import STALE_SECONDS, GenerationCache

    host = socket.gethostname()
    old, dead, live, other = (tmp_path / n for n in ("x.tmp", f"{host}.999999999.ab.tmp", "", ""))
    live = tmp_path / f"{host}.{os.getpid()}.cd.tmp"
    other = tmp_path / "elsewhere.12.ef.tmp"  # another host's write in flight
    for p in (old, dead, live, other):
        p.write_text("{")
    os.utime(old, (time.time() - STALE_SECONDS - 10,) * 2)
    GenerationCache(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.tmp")) == sorted([live.name, other.name])


# --- 1, 2. the DAG over a tampered, damaged or partly deleted study --------------------------


def _copy(small_simulated_study, tmp_path) -> Path:
    """A private copy of the shared study (copy2 keeps mtimes; .snakemake comes along), its config
    unchanged so the copy is as up to date as the original; its cache is the original's, read only."""
    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    shutil.copytree(small_simulated_study.root / "results", tmp_path / "results", symlinks=True)
    shutil.copytree(small_simulated_study.root / ".snakemake", tmp_path / ".snakemake", symlinks=True)
    shutil.copy2(small_simulated_study.config, tmp_path / small_simulated_study.config.name)
    return tmp_path / small_simulated_study.config.name


def test_a_rerun_over_a_forged_sample_stops_naming_it_and_the_audit_fails(small_simulated_study, tmp_path):
    from test_workflow import snakemake

    config = _copy(small_simulated_study, tmp_path)
    samples = pd.read_parquet(tmp_path / SAMPLES)
    i = samples.index[samples["answer"].notna()][0]
    answer = samples.at[i, "answer"]
    samples.at[i, "text"] = samples.at[i, "text"].replace(answer, str(int(float(answer)) + 1))
    samples.at[i, "answer"] = str(int(float(answer)) + 1)
    samples.to_parquet(tmp_path / SAMPLES, index=False)
    rerun = snakemake("--cores", "2", "--configfile", str(config), cwd=tmp_path)
    assert rerun.returncode != 0
    assert f"{SAMPLES} is not the file generation wrote" in rerun.output and f"rm {SAMPLES}" in rerun.output
    audit = subprocess_cotdyn("audit", str(tmp_path / "results/t"), cwd=tmp_path)
    assert audit.returncode != 0 and "registered/samples.parquet" in audit.stdout


def subprocess_cotdyn(*args, cwd):
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_deleted_samples_and_a_truncated_records_file_are_rebuilt_byte_identical(
    small_simulated_study, tmp_path, capsys
):
    """The rerun's jobs run in this process (tests/inprocess.py: Snakemake plans the rerun as a run
    does, the rules' scripts rebuild); a Snakemake process reruns in test_a_rerun_over_a_forged_sample."""
    from inprocess import run_study

    config = _copy(small_simulated_study, tmp_path)
    original = small_simulated_study.root / "results" / "t"
    (tmp_path / SAMPLES).unlink()
    records = tmp_path / "results/t/cells/sim-gsm8k/newline/records.parquet"
    records.write_bytes(records.read_bytes()[:1000])
    capsys.readouterr()
    ran = run_study(config, tmp_path)
    assert "records.parquet is damaged" in capsys.readouterr().err
    assert {"continuations", "records"} <= set(ran) and "reference" not in ran, sorted(ran)
    study = tmp_path / "results" / "t"
    assert (study / "cells/sim-gsm8k/registered/samples.parquet").read_bytes() == (
        original / "cells/sim-gsm8k/registered/samples.parquet"
    ).read_bytes()
    for path in sorted(original.rglob("*")):
        rel = path.relative_to(original).as_posix()
        if path.is_file() and rel.startswith(("analysis/", "cells/")) and not rel.endswith("generation.json"):
            assert (study / rel).read_bytes() == path.read_bytes(), rel


def test_a_raw_file_is_moved_into_place_only_once_sealed(tmp_path):
    from cotdyn.provenance.seal import unsealed_path

    raw = tmp_path / "chains.parquet"
    written = unsealed_path(raw)
    assert written.name == "chains.unsealed.parquet"
    pd.DataFrame({"text": ["a chain"]}).to_parquet(written)
    assert not raw.exists()
    seal = write_seal(raw, "rev", [("k" * 64, 1)], written)
    assert raw.exists() and not written.exists() and seal["file"] == "chains.parquet"
    check_sealed(raw)


def _stage_a_generation(folder: Path, text: str) -> tuple[Path, dict]:
    """A job's unsealed chains and generation.json, as a generation rule leaves them before sealing."""
    from cotdyn.provenance.seal import unsealed_path

    raw, log = folder / "chains.parquet", folder / "generation.json"
    pd.DataFrame({"text": [text]}).to_parquet(unsealed_path(raw))
    unsealed_path(log).write_text(json.dumps({"job": text}))
    return raw, {log: unsealed_path(log)}


def test_the_first_writer_of_a_raw_file_wins_and_the_second_discards_its_own(tmp_path):
    from cotdyn.provenance.seal import unsealed_path

    raw, first_log = _stage_a_generation(tmp_path, "the first job's chain")
    first = write_seal(raw, "rev", [("a" * 64, 1)], unsealed_path(raw), first_log)
    placed = raw.read_bytes()
    raw, second_log = _stage_a_generation(tmp_path, "a duplicate job's chain")
    assert write_seal(raw, "rev", [("b" * 64, 1)], unsealed_path(raw), second_log) is None
    assert raw.read_bytes() == placed and json.loads(seal_path(raw).read_text()) == first
    assert json.loads((tmp_path / "generation.json").read_text()) == {"job": "the first job's chain"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chains.parquet", "generation.json", "seal.json"]
    check_sealed(raw)


def _race(folder: str, job: int, start) -> bool:

    written = Path(folder) / f"job{job}" / "chains.parquet"  # each job's own unsealed file
    written.parent.mkdir()
    pd.DataFrame({"text": [f"job {job}"]}).to_parquet(written)
    start.wait()
    return write_seal(Path(folder) / "chains.parquet", "rev", [(f"{job:064d}", 1)], written) is not None


def test_of_jobs_racing_to_place_one_raw_file_exactly_one_wins_and_its_seal_matches(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(4) as pool:
        start = manager.Barrier(4)
        won = pool.starmap(_race, [(str(tmp_path), job, start) for job in range(4)])
    assert sum(won) == 1
    raw = tmp_path / "chains.parquet"
    check_sealed(raw)
    winner = won.index(True)
    assert pd.read_parquet(raw)["text"].tolist() == [f"job {winner}"]
    assert json.loads(seal_path(raw).read_text())["requests"] == [[f"{winner:064d}", 1]]
    assert not list(tmp_path.glob("job*/chains.parquet")) and not list(tmp_path.glob(".seal.json.*"))


def test_a_yaml_error_in_registered_names_the_file(tmp_path):
    from cotdyn.plan.registration import PreregistrationError, read_registered

    registered = tmp_path / "REGISTERED"
    registered.write_text("plan_sha256: !!python/name:os.system\n")
    with pytest.raises(PreregistrationError, match=str(registered)):
        read_registered(registered)
