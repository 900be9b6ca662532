"""One validation of every config cotdyn reads: the workflow's config file and a study manifest's config.

Both go through ``validate_config``: the run's schema (``config.schema.yaml`` beside this module),
checked by jsonschema with its defaults filled in as Snakemake's validator fills them (and the benchmark
names of ``cotdyn.grading.registry`` as the ``kind`` enum), so the audit
refuses a manifest's config exactly where a run (``workflow/rules/common.smk``) would have. An error names the source, the field
and what the schema expected.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

from cotdyn.files.terminal import printable
from cotdyn.plan.config import ConfigError

# package data: the workflow and the audit of an installed cotdyn read the schema it ships
SCHEMA = Path(__file__).resolve().with_name("config.schema.yaml")
SHOWN = 200  # characters of a schema message shown: the offending value may be long


def field_name(path) -> str:
    """A config field as a dotted path (``variants.m4.subsample_of``; ``cells[0]``)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the config itself)"


def _filling_validator(schema: dict):
    """Draft 2020-12 with each object's schema defaults filled in, as Snakemake's ``validate`` does;
    jsonschema directly, so a reviewer's core install (no snakemake) audits with the same rules."""
    from jsonschema import Draft202012Validator, validators

    check_properties = Draft202012Validator.VALIDATORS["properties"]

    def properties(validator, props, instance, subschema):
        if isinstance(instance, dict):
            for key, sub in props.items():
                if "default" in sub:
                    instance.setdefault(key, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, props, instance, subschema)

    return validators.extend(Draft202012Validator, {"properties": properties})(schema)


def with_registered_names(rules: dict) -> dict:
    """The schema with the names only the registry knows filled in: a benchmark's ``kind`` is one of
    ``cotdyn.grading.registry.kinds()`` (the schema file lists none, so a declared benchmark needs
    no schema edit)."""
    from cotdyn.grading.registry import kinds

    benchmark = rules["properties"]["benchmarks"]["additionalProperties"]["properties"]
    benchmark["kind"] = {**benchmark["kind"], "enum": kinds()}
    return rules


def _message(error) -> str:
    message = error.message
    described = error.schema.get("description") if isinstance(error.schema, dict) else None
    if error.validator == "pattern" and described:  # the schema's words, not its regex
        message = f"{printable(repr(error.instance))[:SHOWN]}: expected {described}"
    elif len(message) > SHOWN:  # the value cut, what the schema expected kept
        message = f"{message[:SHOWN]}... (expected {error.validator}: {error.validator_value!r})"
    return message


def _rules(schema: str | Path, source: str) -> dict:
    import yaml

    if not Path(schema).is_file():
        raise ConfigError(f"{source}: the config schema {schema} is missing from this checkout")
    rules = with_registered_names(yaml.safe_load(Path(schema).read_text()))
    rules["$id"] = Path(schema).resolve().as_uri()
    return rules


# The seed-000 toy experiment's settings. The experiment is gone (CHANGELOG.md), but the schema filled
# these in everywhere before, so every study manifest written then holds them.
TOY_KEYS = ("size", "seed")


def _toy_keys(config: dict) -> list[str]:
    infogain = config.get("infogain")
    return [key for key in TOY_KEYS if isinstance(infogain, dict) and key in infogain]


def without_toy_keys(config: dict) -> dict:
    """A study manifest's config without the toy experiment's keys, so an older study still audits."""
    if not isinstance(config, dict) or not _toy_keys(config):
        return config
    return {**config, "infogain": {k: v for k, v in config["infogain"].items() if k not in TOY_KEYS}}


def validate_config(
    config, source: str, schema: str | Path = SCHEMA, source_of: Callable[[list], str] | None = None
) -> dict:
    """``config`` validated and its schema defaults filled in (in place, as Snakemake does); else
    ConfigError naming ``source`` (or ``source_of(path)``, e.g. the ``--config`` entry that set the
    field: ``cotdyn.plan.config.override_source``), the field and what was expected."""
    import jsonschema

    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping, got {type(config).__name__}")
    toy = _toy_keys(config)
    if toy:
        where = source_of(["infogain", toy[0]]) if source_of else source
        raise ConfigError(
            f"{where}: field infogain.{toy[0]}: the seed-000 toy experiment was removed (CHANGELOG.md); "
            "delete infogain.size and infogain.seed (information gain on a study's traces is infogain.traces)"
        )
    rules = _rules(schema, source)
    try:
        _filling_validator(rules).validate(config)
    except jsonschema.ValidationError as error:
        where = source_of(list(error.absolute_path)) if source_of else source
        raise ConfigError(f"{where}: field {field_name(error.absolute_path)}: {_message(error)}") from None
    return config


# The plan's values a schema types and bounds: its protocol (the config's protocol definition, so a
# plan and a config override are held to one range) and its small-group rule.
PLAN_PARTS = {
    "protocol": {"$ref": "#/$defs/protocol", "type": "object"},
    "analysis": {
        "type": "object",
        "properties": {
            "groups": {
                "type": "object",
                "properties": {
                    "min_group_size": {"type": "integer", "minimum": 1, "maximum": 1000000},
                    "precise_group_size": {"type": "integer", "minimum": 1, "maximum": 1000000},
                },
            }
        },
    },
}


def validate_plan(plan, source: str, schema: str | Path = SCHEMA) -> dict:
    """The plan's protocol values typed and in range (the config schema's ``$defs/protocol``) and its
    small-group rule positive; ConfigError naming ``source`` (the plan's file), the field, the value
    and the range. ``cotdyn init`` checks the plan it writes, ``cotdyn register`` the plan it freezes,
    and every run (and dry run) the plan it reads, so an ``m: five`` never reaches a job."""
    import jsonschema

    if not isinstance(plan, dict):
        raise ConfigError(f"{source}: a plan is a mapping, got {type(plan).__name__}")
    rules = _rules(schema, source)
    checked = {"$defs": rules["$defs"], "$id": rules["$id"], "type": "object", "properties": PLAN_PARTS}
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(checked).iter_errors(plan))
    if error is not None:
        raise ConfigError(f"{source}: {field_name(error.absolute_path)}: {_message(error)}")
    return plan
