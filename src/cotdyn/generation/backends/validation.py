"""The complete validation of a config: cotdyn.plan.schema.validate_config (which fills in the
benchmark names) on the schema with the backends filled in (registry.config_schema). The plan layer
lies below generation, so it cannot know the backends itself. Its own module: the generation jobs,
which import the registry, need no jsonschema (tests/test_envs.py).

``plugin_problems`` is read first, by the run as the workflow is read (a dry run too) and by the
audit: a backend, benchmark or signal the config names that two packages declare, or whose plugin
does not load, is named with its packages and the fix, where the schema would only say the name is
not one it knows (``cotdyn init`` names a refused ``--backend`` or ``--benchmark`` the same way)."""

from __future__ import annotations

from cotdyn.generation.backends.registry import misplaced_options, schema_file


def validate_config(config, source: str, schema_path=None, source_of=None) -> dict:
    """``config`` validated, its defaults filled in; else ConfigError naming ``source`` (or
    ``source_of(path)``: cotdyn.plan.schema.validate_config) and the field."""
    from cotdyn.plan.config import ConfigError
    from cotdyn.plan.schema import SCHEMA
    from cotdyn.plan.schema import validate_config as validate_on

    misplaced = misplaced_options(config)
    if misplaced:
        raise ConfigError(f"{source}: {misplaced[0]}")
    with schema_file(schema_path or SCHEMA) as schema:
        return validate_on(config, source, schema, source_of)


def plugin_problems(config) -> list[str]:
    """Each backend (``models.*.backend``), benchmark (``benchmarks.*.kind``) and signal (``signals``)
    the config names whose plugin is refused: declared by two packages, or failing to load."""
    from cotdyn.generation.backends import registry as backends
    from cotdyn.grading import registry as benchmarks
    from cotdyn.protocol import signals

    def entries(key: str, field: str) -> list[tuple[str, object]]:
        section = config.get(key) if isinstance(config, dict) else None
        if not isinstance(section, dict):
            return []
        return [(f"{key}.{name}.{field}", e.get(field)) for name, e in section.items() if isinstance(e, dict)]

    named = [
        *((where, value, backends) for where, value in entries("models", "backend")),
        *((where, value, benchmarks) for where, value in entries("benchmarks", "kind")),
    ]
    listed = config.get("signals") if isinstance(config, dict) else None
    if isinstance(listed, list):
        named += [(f"signals[{i}]", value, signals) for i, value in enumerate(listed)]
    return [
        f"{where}: {registry.BROKEN[value]}"
        for where, value, registry in named
        if isinstance(value, str) and value in registry.BROKEN
    ]
