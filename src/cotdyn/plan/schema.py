"""One validation of every config cotdyn reads: the workflow's config file and a study manifest's config.

Both go through ``validate_config``: the run's schema (``workflow/schemas/config.schema.yaml``)
by Snakemake's own validator, the one ``workflow/rules/common.smk`` uses, so the audit refuses a
manifest's config exactly where a run would have refused it. An error names the source, the field
and what the schema expected.
"""

from __future__ import annotations

from pathlib import Path

from cotdyn.plan.config import ConfigError

# The checkout this code runs from (src/cotdyn/plan/schema.py lies three folders below it).
CHECKOUT = Path(__file__).resolve().parents[3]
SCHEMA = CHECKOUT / "workflow" / "schemas" / "config.schema.yaml"
SHOWN = 200  # characters of a schema message shown: the offending value may be long


def field_name(path) -> str:
    """A config field as a dotted path (``variants.m4.subsample_of``; ``cells[0]``)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the config itself)"


def validate_config(config, source: str, schema: str | Path = SCHEMA) -> dict:
    """``config`` validated and its schema defaults filled in (in place, as Snakemake does); else
    ConfigError naming ``source``, the field and what was expected."""
    import jsonschema
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping, got {type(config).__name__}")
    if not Path(schema).is_file():
        raise ConfigError(f"{source}: the config schema {schema} is missing from this checkout")
    try:
        validate(config, str(schema))
    except WorkflowError as e:
        error = e.__context__  # Snakemake raises its WorkflowError while handling jsonschema's error
        if not isinstance(error, jsonschema.ValidationError):
            raise ConfigError(f"{source}: {e}") from None
        message = error.message
        if len(message) > SHOWN:  # the value cut, what the schema expected kept
            message = f"{message[:SHOWN]}... (expected {error.validator}: {error.validator_value!r})"
        raise ConfigError(f"{source}: field {field_name(error.absolute_path)}: {message}") from None
    return config
