"""Backends by name: each declared once, with what the rest of cotdyn must know of it before one is built.

A backend is declared by decorating the function that builds it (``register_backend``), the way
inspect_ai's ``@modelapi`` and lm-evaluation-harness's ``@register_model`` declare theirs. The
declaration is the one place that names a backend: the config schema (``config_schema``), the
model-entry checks (``check_entry``), ``cotdyn init --backend``, the timing ledger's model identity
and speed settings (``cotdyn.generation.timings.identity``), the estimate's batching caveat, the
first-chunk forecast and the generation job's conda environment (workflow/rules/common.smk) all read it.

A model entry holds the settings every backend shares (``backend``, ``id``, ``revision``, ``gguf``,
``device``, ``chunk_size``, ``resources``; ``dtype`` comes from the protocol) and the backend's own
options in one mapping under the backend's ``options_key`` (its name, but for the simulated model,
whose options have always been ``planted:``). A backend may also accept some options at the entry's
top level (``flat_options``), as configs written before its block gave them.
"""

from __future__ import annotations

import copy
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cotdyn.generation.backends.base import Backend

# The conda environments of workflow/rules/common.smk's generation rules, by what a backend needs.
ENVIRONMENTS = ("generate-cpu", "generate-cuda", "generate-vllm")


def torch_environment(entry: dict) -> str:
    """torch's environment for the entry's device: the CUDA build on a GPU."""
    return "generate-cuda" if str(entry.get("device", "cpu")).startswith("cuda") else "generate-cpu"


def _on_cpu(entry: dict, options: dict) -> dict:
    return {"device": "cpu"}


@dataclass(frozen=True)
class BackendSpec:
    """What cotdyn knows of a backend by its name, before one is built."""

    name: str
    # (model entry, its options with defaults applied, the problems' golds, benchmark) -> a Backend
    build: Callable[[dict, dict, dict[str, str], str | None], Backend]
    summary: str  # one line: ``cotdyn init --help`` and error messages
    options_key: str = ""  # the entry's key holding the options; "" = the backend's name
    options_schema: dict = field(default_factory=lambda: {"type": "object", "additionalProperties": False})
    defaults: dict = field(default_factory=dict)  # options left unset take these (build and speed settings)
    flat_options: tuple[str, ...] = ()  # options also accepted at the entry's top level (older configs)
    needs_id: bool = False  # the entry names ``id`` (or ``gguf``) unless it is a panel model of the plan
    needs_revision: bool = False  # the entry pins ``revision`` (part of every cache key)
    # the settings that change generation speed beyond the backend's name and chunk_size (the ledger
    # matches timings on them): (entry, options) -> dict
    speed: Callable[[dict, dict], dict] = _on_cpu
    # how a timed rate depends on how full batches were (estimates._batch_caveat): None (it does not),
    # "rows" (batches of the ``batch_size`` option), "scheduler" (the engine or server batches)
    batching: str | None = None
    # where no timing exists, forecast the rest of a phase from its first chunk (timings.first_chunk);
    # off for a backend that takes no time
    first_chunk_forecast: bool = True
    environment: Callable[[dict], str] = torch_environment  # one of ENVIRONMENTS, from the entry
    identity: Callable[[dict, dict], str] | None = None  # the model before it loads; None = id/gguf/revision
    # cotdyn init's entry: (model id, revision, device) -> the entry without options; a ValueError
    # says what is missing
    init_entry: Callable[[str | None, str | None, str], dict] | None = None
    default_key: str = "model"  # cotdyn init's model key when --model is not given
    cpu_dtype: str | None = None  # cotdyn init's study dtype when the model runs on this machine's CPU

    @property
    def key(self) -> str:
        return self.options_key or self.name


REGISTRY: dict[str, BackendSpec] = {}


def register_backend(name: str, **declared) -> Callable:
    """Decorate a backend's build function to register it under ``name`` (see ``BackendSpec``)."""

    def decorate(build: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"backend '{name}' is registered twice")
        REGISTRY[name] = BackendSpec(name, build, **declared)
        return build

    return decorate


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def spec(name, where: str = "") -> BackendSpec:
    if name not in REGISTRY:
        prefix = f"{where}: " if where else ""
        raise ValueError(f"{prefix}unknown backend '{name}' (known: {', '.join(REGISTRY)})")
    return REGISTRY[name]


def options(entry: dict, where: str = "") -> dict:
    """The entry's backend options: its block laid over any flat ones, over the declared defaults."""
    declared = spec(entry.get("backend"), where)
    block = entry.get(declared.key, {})
    if not isinstance(block, dict):
        raise ValueError(f"{where or 'model'}: '{declared.key}' must be a mapping of options, not {block!r}")
    flat = {k: entry[k] for k in declared.flat_options if k in entry}
    twice = sorted(set(flat) & set(block))
    if twice:
        raise ValueError(f"{where or 'model'}: {', '.join(twice)} given both at the top and under '{declared.key}'")
    return {**declared.defaults, **flat, **block}


def check_entry(entry: dict, where: str) -> None:
    """What the schema cannot say of a model entry (the schema checks the options' types): a
    registered backend, and the id and revision it needs. ``where`` names the model in errors."""
    declared = spec(entry.get("backend"), where)
    options(entry, where)
    if declared.needs_id and "id" not in entry and "gguf" not in entry:
        raise ValueError(f"{where} needs an 'id' (or 'gguf'), or must be a panel model of the plan")
    if declared.needs_revision and not entry.get("revision"):
        raise ValueError(f"{where}: backend {declared.name} needs a pinned 'revision' (part of every cache key)")


def config_schema(base: dict) -> dict:
    """The config schema (workflow/schemas/config.schema.yaml, loaded) with the registry filled in:
    the model entry's ``backend`` enum, each backend's options block, and its flat options."""
    schema = copy.deepcopy(base)
    entry = schema["properties"]["models"]["additionalProperties"]
    entry["properties"]["backend"] = {**entry["properties"].get("backend", {}), "enum": list(REGISTRY)}
    for declared in REGISTRY.values():
        entry["properties"][declared.key] = declared.options_schema
        for name in declared.flat_options:
            entry["properties"][name] = declared.options_schema["properties"][name]
    return schema


@contextmanager
def schema_file(path):
    """A temporary file holding ``config_schema`` of the YAML at ``path``: Snakemake's ``validate``
    reads a schema from a file only. Every reference in the schema is local (``#/$defs/...``)."""
    import yaml

    text = yaml.safe_dump(config_schema(yaml.safe_load(Path(path).read_text())), sort_keys=False)
    with tempfile.TemporaryDirectory(prefix="cotdyn-schema-") as folder:
        generated = Path(folder) / "config.schema.yaml"
        generated.write_text(text)
        yield str(generated)
