"""Adding a backend touches one declaration (cotdyn.generation.backends.registry): a backend declared
here, in the test, reaches the config schema, the model-entry checks, `cotdyn init`'s choices and
entry, and make_backend -- with no other edit."""

from __future__ import annotations

import argparse

import pytest
import yaml
from conftest import ROOT

from cotdyn.cli.init_backend import INIT, declare_init
from cotdyn.generation.backends import make_backend, register_backend, registry
from cotdyn.plan.config import ConfigError
from cotdyn.plan.schema import SCHEMA, validate_config

TOY_OPTIONS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"speed": {"type": "integer", "minimum": 1}, "flavour": {"type": "string"}},
}


@pytest.fixture
def toy():
    """A backend named 'toy', declared for the test and taken out again after it."""

    @register_backend(
        "toy",
        summary="toy: the test's own backend",
        options_schema=TOY_OPTIONS,
        defaults={"speed": 3},
        needs_revision=True,
    )
    def build(entry, options, golds, benchmark):
        return ("a toy backend", options)

    declare_init(
        "toy", lambda model_id, revision, device: {"backend": "toy", "revision": revision or "r0"}, "toy_model"
    )
    yield registry.REGISTRY["toy"]
    del registry.REGISTRY["toy"], INIT["toy"]


def study_config(model: dict) -> dict:
    return {
        "study": "t",
        "plan": "preregistration/plan.yaml",
        "cache": "cache",
        "cells": ["toy_model-gsm8k"],
        "models": {"toy_model": model},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": "data/gsm8k_test.jsonl"}},
    }


def test_a_declared_backend_is_in_the_schema_and_its_options_are_checked(toy, tmp_path):
    schema = registry.config_schema(yaml.safe_load(SCHEMA.read_text()))
    entry = schema["properties"]["models"]["additionalProperties"]["properties"]
    assert "toy" in entry["backend"]["enum"] and entry["toy"] == TOY_OPTIONS
    generated = tmp_path / "schema.yaml"
    generated.write_text(yaml.safe_dump(schema))
    validate_config(study_config({"backend": "toy", "revision": "r1", "toy": {"speed": 2}}), "study.yaml", generated)
    with pytest.raises(ConfigError, match=r"study.yaml: field models.toy_model.toy.speed: 0 is less than"):
        validate_config(study_config({"backend": "toy", "toy": {"speed": 0}}), "study.yaml", generated)
    with pytest.raises(ValueError, match="backend toy needs a pinned 'revision'"):
        registry.check_entry({"backend": "toy"}, "model 'toy_model'")


def test_without_its_declaration_the_name_is_unknown_everywhere(tmp_path):
    schema = registry.config_schema(yaml.safe_load(SCHEMA.read_text()))
    assert "toy" not in schema["properties"]["models"]["additionalProperties"]["properties"]["backend"]["enum"]
    with pytest.raises(
        ValueError, match="unknown backend 'toy' \\(known: simulated, transformers, vllm, openai_compat"
    ):
        make_backend({"backend": "toy", "revision": "r1"})


def test_cotdyn_init_offers_the_declared_backend_and_writes_its_entry(toy, tmp_path, monkeypatch):
    from cotdyn.cli.init import add_subcommand, write_skeleton

    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    add_subcommand(commands)
    words = ["init", "studies/x", "--jsonl", "p.jsonl", "--answer", "number", "--backend", "toy", "--option", "speed=5"]
    args = parser.parse_args(words)
    assert args.backend == "toy" and args.option == ["speed=5"]
    init_help = " ".join(commands.choices["init"].format_help().split())  # unwrapped
    assert "toy: the test's own backend" in init_help

    (tmp_path / "problems.jsonl").write_text('{"id": "a", "question": "What is 1 + 1?", "gold": "2"}\n' * 1)
    monkeypatch.chdir(tmp_path)
    registered = str(ROOT / "preregistration" / "plan.yaml")
    write_skeleton(tmp_path / "mine", "problems.jsonl", "number", {"id": "id", "question": "question", "gold": "gold"}, backend="toy",
                   revision="r9", registered_plan=registered, options={"speed": 5})  # fmt: skip
    config = yaml.safe_load((tmp_path / "mine" / "config.yaml").read_text())
    assert config["models"] == {"toy_model": {"backend": "toy", "revision": "r9", "toy": {"speed": 5}}}
    from cotdyn.cli.init import InitError

    with pytest.raises(InitError, match="models.toy_model.toy.speed: .fast. is not of type .integer."):
        write_skeleton(tmp_path / "other", "problems.jsonl", "number", {"id": "id", "question": "question", "gold": "gold"}, backend="toy",
                       registered_plan=registered, options={"speed": "fast"})  # fmt: skip
    del INIT["toy"]  # a backend whose package declares no init entry: named, not a KeyError
    with pytest.raises(InitError, match=r"--backend toy: its package declares no cotdyn init entry"):
        write_skeleton(tmp_path / "third", "problems.jsonl", "number", {"id": "id", "question": "question", "gold": "gold"}, backend="toy",
                       revision="r9", registered_plan=registered)  # fmt: skip
    declare_init("toy", lambda model_id, revision, device: {"backend": "toy"}, "toy_model")  # the fixture removes it


def test_make_backend_builds_the_declared_backend_with_its_defaults_applied(toy):
    plain = {"backend": "toy", "revision": "r1"}
    assert make_backend(plain) == ("a toy backend", {"speed": 3})
    assert make_backend({**plain, "toy": {"speed": 4}}) == ("a toy backend", {"speed": 4})


def test_a_name_is_declared_once(toy):
    with pytest.raises(ValueError, match="backend 'toy' is registered twice"):
        register_backend("toy", summary="again")(lambda *a: None)


# the model entry's transformers settings as the schema filled them in before backends were declared (main 95f8a77)
FILLED_BEFORE = {"batch_size": 16, "share_prefill": True, "decode": "compacting"}


def test_the_embedded_defaults_model_is_built_with_the_settings_it_had():
    entry = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["models"]["smollm2"]
    assert registry.options(entry) == {**FILLED_BEFORE, "batch_size": 64}


def test_a_backend_option_at_the_top_of_a_model_entry_is_refused_naming_its_block():
    from cotdyn.generation.backends.validation import validate_config as validate_all

    with pytest.raises(ConfigError, match=r"field models.toy_model.batch_size: an option of backend transformers, "
                       r"which lives in its block \(models.toy_model.transformers.batch_size\)"):  # fmt: skip
        validate_all(study_config({"backend": "transformers", "id": "x", "batch_size": 8}), "config.yaml")
    with pytest.raises(ValueError, match="toy: batch_size is an option of backend transformers: it lives under"):
        registry.options({"backend": "transformers", "id": "x", "batch_size": 8}, "toy")


def test_a_manifest_config_written_before_backends_were_declared_still_validates():
    from cotdyn.generation.backends.validation import validate_config as validate_all

    old = study_config({"backend": "simulated", "device": "cpu", "chunk_size": 0, **FILLED_BEFORE})
    assert (
        "batch_size" not in validate_all(registry.options_moved(old), "manifest.json (config)")["models"]["toy_model"]
    )
    old = study_config({"backend": "transformers", "id": "x", **FILLED_BEFORE, "batch_size": 64})
    entry = validate_all(registry.options_moved(old), "manifest.json (config)")["models"]["toy_model"]
    assert registry.options(entry) == {**FILLED_BEFORE, "batch_size": 64}
    with pytest.raises(ConfigError, match="field models.toy_model.transformers.batch_size: 0 is less than the minimum"):
        validate_all(study_config({"backend": "transformers", "id": "x", "transformers": {"batch_size": 0}}), "m")
