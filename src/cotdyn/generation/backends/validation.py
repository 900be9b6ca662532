"""The complete validation of a config: cotdyn.plan.schema.validate_config (which fills in the
benchmark names) on the schema with the backends filled in (registry.config_schema). The plan layer
lies below generation, so it cannot know the backends itself. Its own module: the generation jobs,
which import the registry, need no jsonschema (tests/test_envs.py)."""

from __future__ import annotations

from cotdyn.generation.backends.registry import schema_file


def validate_config(config, source: str, schema_path=None) -> dict:
    """``config`` validated, its defaults filled in; else ConfigError naming ``source`` and the field."""
    from cotdyn.plan.schema import SCHEMA
    from cotdyn.plan.schema import validate_config as validate_on

    with schema_file(schema_path or SCHEMA) as schema:
        return validate_on(config, source, schema)
