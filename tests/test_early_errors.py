"""Issue 53, items 2, 3 and 5: user errors found early, named by what set them, in one line.

Each finding of the issue is a test here (the Snakemake runs are in tests/test_config_overrides.py):
typed --config overrides named in their errors, plan drift naming the study's own deviations.yaml,
the model id resolved at init (offline, from a fake cache), protocol values typed and ranged at init
and register, JSONL keys written twice and ids that differ only in their Unicode normalization, and
the token budget a run may not exceed.
"""

import json
import re
import time
import unicodedata
from argparse import Namespace
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from cotdyn.cli import init_checks
from cotdyn.cli.init import InitError, cmd_init, write_skeleton
from cotdyn.cli.init_checks import resolve_model
from cotdyn.cli.prereg import cmd_register
from cotdyn.dataset.benchmarks import BenchmarkError, load_benchmark, read_jsonl_lines
from cotdyn.generation.estimate import DEFAULT_TOKEN_BUDGET, BudgetError, check_token_budget, study_token_bound
from cotdyn.plan.config import Cell, ConfigError, command_line_overrides, override_source
from cotdyn.plan.load import load_plan
from cotdyn.plan.registration import PreregistrationError, plan_check, register
from cotdyn.plan.schema import validate_config, validate_plan

PLAN = ROOT / "preregistration" / "plan.yaml"


def snakemake_reading(entries):
    """Snakemake 9's own reading of --config entries (snakemake.cli.parse_config)."""
    from snakemake.cli import parse_config

    return parse_config(entries)


# --- 2. typed overrides ----------------------------------------------------------------------------


def test_nested_config_values_are_read_as_yaml():
    entries = ["protocol={continuation_temperature: 0.5, cap: null, dtype: float32}", "study=second", "confirmatory=[]"]
    parsed = snakemake_reading(entries)
    assert parsed["protocol"]["continuation_temperature"] == "0.5"  # Snakemake's strings: the finding
    typed = command_line_overrides(entries, parsed)
    assert typed["protocol"] == (entries[0], {"continuation_temperature": 0.5, "cap": None, "dtype": "float32"})
    assert typed["confirmatory"] == (entries[2], [])
    assert "study" not in typed  # a top-level scalar: Snakemake's own reading stands


def test_an_override_holding_a_key_twice_is_refused_by_name():
    entries = ["protocol={m: 3, m: 4}"]
    with pytest.raises(ConfigError, match=r"^--config protocol=\{m: 3, m: 4\}: key 'm' appears twice"):
        command_line_overrides(entries, snakemake_reading(entries))


def test_a_config_handed_to_the_api_typed_is_left_alone():
    # the API writes a typed config as repr() text; Snakemake did not read it from that text
    given = {"protocol": {"m": 3, "dtype": "float32"}}
    assert command_line_overrides(["protocol={'m': 3, 'dtype': 'float32'}"], given) == {}


def test_a_schema_error_names_the_override_not_the_config_file():
    from cotdyn.generation.backends.registry import schema_file

    entries = ["protocol={m: five}"]
    overrides = command_line_overrides(entries, snakemake_reading(entries))
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["protocol"] = overrides["protocol"][1]
    source = "invalid config (config/config.yaml)"
    with schema_file(ROOT / "src" / "cotdyn" / "plan" / "config.schema.yaml") as schema:
        with pytest.raises(ConfigError) as e:
            validate_config(config, source, schema, lambda path: override_source(overrides, path, source))
    assert str(e.value) == "--config protocol={m: five}: field protocol.m: 'five' is not of type 'integer'"
    assert override_source(overrides, ["models", "smollm2"], source) == source  # the file's own field


def test_the_removed_toy_experiments_settings_are_refused_by_name_but_an_older_manifests_pass():
    from cotdyn.generation.backends.registry import schema_file
    from cotdyn.plan.schema import without_toy_keys

    entries = ["infogain={size: full, seed: 0}"]  # the README's toy command before its removal
    overrides = command_line_overrides(entries, snakemake_reading(entries))
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    source = "invalid config (config/config.yaml)"
    with schema_file(ROOT / "src" / "cotdyn" / "plan" / "config.schema.yaml") as schema:
        with pytest.raises(ConfigError) as e:
            config["infogain"] = overrides["infogain"][1]
            validate_config(config, source, schema, lambda path: override_source(overrides, path, source))
        assert str(e.value).startswith(
            "--config infogain={size: full, seed: 0}: field infogain.size: the seed-000 toy experiment was removed"
        )
        # a manifest written before the removal holds the schema's old default, dropped for its audit
        config["infogain"] = {"size": "reduced", "seed": 0, "traces": {"supervisor": {"id": "x"}}}
        kept = validate_config(without_toy_keys(config), source, schema)
    assert kept["infogain"] == {"traces": {"supervisor": {"id": "x"}}}
    assert config["infogain"]["size"] == "reduced"  # the manifest's own config is not changed


# --- 3. errors that point at the fix ---------------------------------------------------------------


def _study(tmp_path: Path, deviations: str = "[]\n") -> Path:
    folder = tmp_path / "studies" / "mine"
    folder.mkdir(parents=True)
    (folder / "plan.yaml").write_bytes(PLAN.read_bytes())
    register(folder / "plan.yaml", folder / "REGISTERED", "2026-12-01")
    (folder / "deviations.yaml").write_text(deviations)
    return folder


def test_plan_drift_names_the_studys_own_deviations_file(tmp_path):
    folder = _study(tmp_path)
    plan = load_plan(folder / "plan.yaml")
    cell = "qwen7b-gsm8k"
    protocol = {**plan["protocol"], "continuation_temperature": 0.5}
    with pytest.raises(PreregistrationError) as e:
        plan_check(folder / "plan.yaml", [cell], [cell], {"registered": protocol}, plan)
    message = str(e.value)
    assert str(folder / "deviations.yaml") in message and "preregistration/deviations.yaml" not in message
    assert "continuation_temperature" in message and "\n" not in message


# --- 5. validation at init and register ------------------------------------------------------------


def _jsonl(tmp_path: Path, rows: list[dict]) -> str:
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


ROWS = [{"id": f"q{i}", "question": f"What is {i} + 1?", "gold": str(i + 1)} for i in range(3)]


def _init(tmp_path, **kwargs):
    return write_skeleton(
        tmp_path / "mine",
        _jsonl(tmp_path, ROWS),
        "number",
        {"question": "question", "gold": "gold", "id": "id"},
        backend=kwargs.pop("backend", "simulated"),
        registered_plan=str(PLAN),
        **kwargs,
    )


@pytest.mark.parametrize(
    "protocol, expected",
    [
        ({"m": 1_000_000_000}, "--protocol m=1000000000: 1000000000 is greater than the maximum of 256"),
        ({"m": "five"}, "--protocol m=five: 'five' is not of type 'integer'"),
        ({"m": 1}, "--protocol m=1: 1 is less than the minimum of 2"),
        ({"continuation_temperature": -1}, "--protocol continuation_temperature=-1: -1 is less than the minimum of 0"),
        (
            {"reference_max_tokens": 10**9},
            "--protocol reference_max_tokens=1000000000: 1000000000 is greater than the maximum of 131072",
        ),
        ({"continuation_max_tokens": 0}, "--protocol continuation_max_tokens=0: 0 is less than the minimum of 1"),
    ],
)
def test_init_refuses_protocol_values_out_of_type_or_range(tmp_path, protocol, expected):
    with pytest.raises(InitError, match="^" + re.escape(expected) + "$"):
        _init(tmp_path, protocol=protocol)
    assert not (tmp_path / "mine").exists()


def test_init_refuses_a_negative_min_group_size(tmp_path):
    with pytest.raises(InitError, match=r"^--min-group-size -3: a group needs at least 1 problem$"):
        _init(tmp_path, min_group_size=-3)


def test_init_prints_one_line_not_a_traceback(tmp_path, capsys):
    args = Namespace(
        folder=str(tmp_path / "mine"), jsonl=_jsonl(tmp_path, ROWS), answer="number", question="question",
        gold="gold", id="id", options=None, model=None, benchmark=None, backend="simulated", model_id=None,
        revision=None, device=None, dtype=None, registered_plan=str(PLAN), protocol=["m=five"],
        min_group_size=None, option=[], signal=[],
    )  # fmt: skip
    assert cmd_init(args) == 1
    err = capsys.readouterr().err
    assert err == "error: --protocol m=five: 'five' is not of type 'integer'\n"


def test_register_refuses_a_plan_with_mistyped_values(tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.read_text().replace("  m: 5\n", "  m: five\n", 1))
    args = Namespace(
        plan=str(plan), registered=str(tmp_path / "REGISTERED"), date="2026-12-01", timestamp_url=None,
        timestamp_token=None, registry_url=None,
    )  # fmt: skip
    assert cmd_register(args) == 1
    assert capsys.readouterr().err == f"error: {plan}: protocol.m: 'five' is not of type 'integer'\n"
    assert not (tmp_path / "REGISTERED").exists()


def test_every_registered_plan_is_in_range():
    for path in sorted((ROOT / "preregistration").rglob("plan.yaml")):
        validate_plan(load_plan(path), str(path))


# the model id: a local folder, or the offline cache; never the network in these tests


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """HF_HOME at a fake cache holding org/tiny at commit abc123 (main), offline."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = tmp_path / "hf" / "hub" / "models--org--tiny"
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123" / "config.json").write_text("{}")

    def no_network(*args):
        raise AssertionError("the hub was asked while HF_HUB_OFFLINE is set")

    monkeypatch.setattr(init_checks, "_ask_the_hub", no_network)
    return repo


def test_a_cached_model_id_resolves_offline(offline_cache):
    assert "abc123" in resolve_model("org/tiny", None)
    assert "abc123" in resolve_model("org/tiny", "main")
    assert "abc123" in resolve_model("org/tiny", "abc123")


def test_a_wrong_model_id_is_named_at_once_with_a_hint(offline_cache):
    started = time.monotonic()
    with pytest.raises(InitError) as e:
        resolve_model("org/tiny-typo", None)
    assert time.monotonic() - started < 2
    message = str(e.value)
    assert message.startswith("--model-id org/tiny-typo: not a local folder, and not in the Hugging Face cache")
    assert "HF_HUB_OFFLINE is set" in message and "did you mean org/tiny" in message
    with pytest.raises(InitError, match="at revision deadbeef.*holds it at abc123"):
        resolve_model("org/tiny", "deadbeef")


def test_a_local_model_folder_must_hold_a_model(tmp_path, offline_cache):
    folder = tmp_path / "weights"
    folder.mkdir()
    with pytest.raises(InitError, match="holds no a model"):
        resolve_model(str(folder), None)
    (folder / "tokenizer.json").write_text("{}")
    assert resolve_model(str(folder), "rev-1", tokenizer_only=True) == f"local folder {folder}"
    (folder / "config.json").write_text("{}")
    assert resolve_model(str(folder), None) == f"local folder {folder}"
    with pytest.raises(InitError, match="no such folder"):
        resolve_model(str(tmp_path / "nowhere"), None)


def test_init_refuses_a_wrong_model_id_before_writing(tmp_path, offline_cache):
    with pytest.raises(InitError, match="--model-id org/tiny-typo: not a local folder"):
        _init(tmp_path, backend="transformers", model_id="org/tiny-typo")
    assert not (tmp_path / "mine").exists()
    written = _init(tmp_path, backend="transformers", model_id="org/tiny")
    config = yaml.safe_load(written[0].read_text())
    assert config["models"]["smollm2"]["id"] == "org/tiny"


# JSONL


def test_a_jsonl_key_written_twice_is_refused(tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_text(
        '{"id": "a", "question": "q", "gold": "1"}\n{"id": "b", "question": "q", "gold": "1", "gold": "2"}\n'
    )
    with pytest.raises(BenchmarkError, match=r"dup.jsonl: line 2: key 'gold' appears twice in one object"):
        read_jsonl_lines(path)
    with pytest.raises(InitError, match=r"line 2: key 'gold' appears twice"):
        write_skeleton(
            tmp_path / "mine", str(path), "number", {"question": "question", "gold": "gold", "id": "id"},
            backend="simulated", registered_plan=str(PLAN),
        )  # fmt: skip


def test_ids_differing_only_in_normalization_are_refused(tmp_path):
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    rows = [{"id": nfc, "question": "q1", "gold": "1"}, {"id": nfd, "question": "q2", "gold": "2"}]
    spec = {"kind": "jsonl", "path": _jsonl(tmp_path, rows), "answer": "number",
            "fields": {"question": "question", "gold": "gold", "id": "id"}}  # fmt: skip
    with pytest.raises(BenchmarkError, match=r"line 2, field 'id': id 'cafe\\u0301' and id 'caf\\xe9' \(line 1\)"):
        load_benchmark(spec)
    rows[1]["id"] = "other"
    spec["path"] = _jsonl(tmp_path, rows)
    assert [p.problem_id for p in load_benchmark(spec)] == [nfc, "other"]


# the token budget


def _cell(n: int) -> dict:
    benchmark = {"kind": "arithmetic", "n": n}
    return {"c-arithmetic": Cell("c-arithmetic", "c", "arithmetic", {"backend": "simulated"}, benchmark)}


def test_the_run_refuses_a_study_past_its_token_budget():
    protocol = {**load_plan(PLAN)["protocol"], "m": 1_000_000_000}
    protocol.setdefault("checkpoints", "steps")
    with pytest.raises(BudgetError) as e:
        check_token_budget("s", _cell(40), {"registered": protocol}, ["registered"], {})
    message = str(e.value)
    assert "more than its token budget of 100,000,000,000" in message and "--config token_budget=N" in message
    total, _, _ = study_token_bound(_cell(40), {"registered": protocol}, ["registered"], {})
    assert check_token_budget("s", _cell(40), {"registered": protocol}, ["registered"], {}, total) == total
    registered = {**load_plan(PLAN)["protocol"], "checkpoints": "steps"}
    assert check_token_budget("s", _cell(1319), {"registered": registered}, ["registered"], {}) < DEFAULT_TOKEN_BUDGET


def test_a_runs_early_read_of_the_rows_names_changed_data(tmp_path):
    from cotdyn.dataset.benchmarks import check_local_rows, content_sha256

    spec = {"kind": "jsonl", "path": _jsonl(tmp_path, ROWS), "answer": "number",
            "fields": {"question": "question", "gold": "gold", "id": "id"}}  # fmt: skip
    pinned = content_sha256(load_benchmark(spec))
    assert check_local_rows({**spec, "content_sha256": pinned}) == 3
    with pytest.raises(BenchmarkError, match=f"content sha256 {pinned} differs from the pinned 0{{64}}"):
        check_local_rows({**spec, "content_sha256": "0" * 64})
    assert check_local_rows({"kind": "arithmetic", "n": 5}) == 0  # nothing local to read
