"""Backends by name: each declared once, with what the rest of cotdyn must know of it before one is built.

A backend is declared by decorating the function that builds it (``register_backend``), the way
inspect_ai's ``@modelapi`` and lm-evaluation-harness's ``@register_model`` declare theirs. The
declaration is the one place that names a backend: the config schema (``config_schema``), the
model-entry checks (``check_entry``), ``cotdyn init --backend`` and the settings it writes, the
packages it needs (checked as it is built, listed by ``cotdyn ls``, recorded in the cell manifest)
and the generation job's conda environment (``environment_for``) all read it.

Backends are found through packaging entry points of group ``cotdyn.backends`` (``discover``), cotdyn's
own (cotdyn.generation.backends.builtin) as a lab's plugin package's: an entry point names a module to
import, whose declaration registers the backend, and the registry records the package it came from.

A model entry holds the settings every backend shares (``backend``, ``id``, ``revision``, ``gguf``,
``device``, ``chunk_size``, ``resources``; ``dtype`` comes from the protocol) and the backend's own
options in one mapping under the backend's ``options_key`` (its name, but for the simulated model,
whose options have always been ``planted:``). An option given at the entry's top level is refused
by name, saying the block it belongs in (``misplaced_options``).
"""

from __future__ import annotations

import copy
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cotdyn import plugins
from cotdyn.generation.backends.base import Backend
from cotdyn.plugins import Dependency

GROUP = "cotdyn.backends"
# cotdyn's own conda environments (envs/<name>.yaml), which a declaration's ``runs_in`` may name; a
# plugin may name a YAML file of its own instead (a path ending in .yaml or .yml)
ENVIRONMENTS = ("generate-cpu", "generate-cuda", "generate-vllm")
# model-entry settings shared by backends, which mean something to a backend only where its
# declaration's ``settings`` name them (cotdyn init writes and accepts only those)
SETTINGS = ("device", "dtype")


def device_kind(entry: dict) -> str:
    """ "cuda" for an entry on a GPU, else "cpu": the key of a ``runs_in`` mapping."""
    return "cuda" if str(entry.get("device", "cpu")).startswith("cuda") else "cpu"


def torch_environment(entry: dict) -> str:
    """torch's environment for the entry's device: the CUDA build on a GPU."""
    return "generate-cuda" if device_kind(entry) == "cuda" else "generate-cpu"


@dataclass(frozen=True)
class BackendSpec:
    """What cotdyn knows of a backend by its name, before one is built."""

    name: str
    # (model entry, its options with defaults applied, the problems' golds, benchmark) -> a Backend
    build: Callable[[dict, dict, dict[str, str], str | None], Backend]
    summary: str  # one line: ``cotdyn init --help`` and error messages
    options_key: str = ""  # the entry's key holding the options; "" = the backend's name
    options_schema: dict = field(default_factory=lambda: {"type": "object", "additionalProperties": False})
    defaults: dict = field(default_factory=dict)  # options left unset take these
    needs_id: bool = False  # the entry names ``id`` (or ``gguf``) unless it is a panel model of the plan
    needs_revision: bool = False  # the entry pins ``revision`` (part of every cache key)
    # the packages it needs beyond cotdyn's own: checked as it is built, listed by `cotdyn ls`, recorded
    # in the cell manifest, and pinned in its environments' envs/*.yaml (tests/test_envs.py)
    requires: tuple[Dependency, ...] = ()
    # the conda environment of its generation jobs: one (a name in ENVIRONMENTS, or a plugin's own
    # YAML file), or one per device kind {"cpu": ..., "cuda": ...} (``device_kind``)
    runs_in: str | dict[str, str] = "generate-cpu"
    # which of SETTINGS mean something to it: cotdyn init writes and accepts only those
    settings: tuple[str, ...] = ()
    # the seeds its sampler honours, from its options (None: every seed cotdyn draws): each sample's
    # seed is sent, recorded and audited reduced into them (cotdyn.protocol.seeds.served_seed)
    seeds: Callable[[dict], int | None] = lambda options: None
    # where the weights, not the study, fix the precision (a served model, a GGUF file): (the entry,
    # its options) -> that precision ("Q4_1"; None where it cannot be told), which cotdyn init
    # registers as the study's dtype and the backend checks as it loads
    weights_precision: Callable[[dict, dict], str | None] | None = None

    @property
    def key(self) -> str:
        return self.options_key or self.name

    @property
    def environments(self) -> tuple[str, ...]:
        """Every environment its jobs may run in."""
        return tuple(sorted(set(self.runs_in.values()))) if isinstance(self.runs_in, dict) else (self.runs_in,)

    def environment(self, entry: dict) -> str:
        """The environment of the entry's generation jobs (``runs_in``)."""
        if isinstance(self.runs_in, dict):
            kind = device_kind(entry)
            if kind not in self.runs_in:
                raise ValueError(f"backend {self.name} declares no environment for a {kind} device")
            return self.runs_in[kind]
        return self.runs_in


REGISTRY: dict[str, BackendSpec] = {}
ORIGINS: dict[str, plugins.Plugin] = {}  # backend -> the entry point (and package) it was found through
BROKEN: dict[str, plugins.PluginError] = {}  # backend -> why its plugin could not be loaded


def register_backend(name: str, **declared) -> Callable:
    """Decorate a backend's build function to register it under ``name`` (see ``BackendSpec``)."""

    def decorate(build: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"backend '{name}' is registered twice")
        REGISTRY[name] = check_declaration(BackendSpec(name, build, **declared))
        return build

    return decorate


def check_declaration(declared: BackendSpec) -> BackendSpec:
    """Refuse a declaration that names an unknown setting or environment, as it is made."""
    unknown = sorted(set(declared.settings) - set(SETTINGS))
    if unknown:
        raise ValueError(f"backend {declared.name}: unknown settings {unknown} (known: {', '.join(SETTINGS)})")
    for env in declared.environments:
        if env not in ENVIRONMENTS and not env.endswith((".yaml", ".yml")):
            raise ValueError(
                f"backend {declared.name}: runs_in '{env}' is neither one of {', '.join(ENVIRONMENTS)} "
                "nor a conda YAML file of its own"
            )
    if declared.weights_precision and "dtype" not in declared.settings:
        raise ValueError(f"backend {declared.name}: a weights_precision, but 'dtype' is not one of its settings")
    return declared


def discover() -> None:
    """Import every backend plugin (group ``cotdyn.backends``) not yet registered, recording its
    package. Each entry point's name must be the backend its declaration registers. A plugin that
    fails to load is kept in BROKEN, so its own error is raised where it is asked for, and the other
    backends stay usable. (cotdyn.generation.backends imports cotdyn's own declarations before it
    calls this: their entry points then name their package, as a plugin's do.)"""
    plugins.discover(GROUP, _found, ORIGINS, BROKEN)


def _found(plugin: plugins.Plugin, loaded: object) -> None:
    if plugin.name not in REGISTRY:
        raise plugins.PluginError(
            f"{GROUP} plugin '{plugin.name}' from {plugin.package} registered no backend of that name "
            f"(importing {plugin.module} registered: {', '.join(REGISTRY) or 'none'})"
        )


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def spec(name, where: str = "") -> BackendSpec:
    prefix = f"{where}: " if where else ""
    if name in BROKEN and name not in REGISTRY:
        raise ValueError(f"{prefix}{BROKEN[name]}")
    if name not in REGISTRY:
        raise ValueError(f"{prefix}unknown backend '{name}' (known: {', '.join(REGISTRY)})")
    return REGISTRY[name]


def package_of(name: str) -> str:
    """The distribution (name and version) a backend comes from, as ``cotdyn ls`` lists it."""
    if name not in ORIGINS and name in REGISTRY and REGISTRY[name].build.__module__.startswith("cotdyn."):
        return f"cotdyn {plugins.installed_version('cotdyn')} (no entry point: reinstall cotdyn)"
    return plugins.package_of(ORIGINS, name)


def check_requires(declared: BackendSpec) -> None:
    """Each package the backend declares, installed in range and importable (``MissingDependency``)."""
    for dependency in declared.requires:
        plugins.check_dependency(dependency, f"backend {declared.name} ({package_of(declared.name)})")


def environment_for(entry: dict, envs: str = "../../envs") -> str:
    """The conda file of the entry's generation jobs, as its backend's declaration names it: cotdyn's
    own ``<envs>/<name>.yaml`` (``envs`` relative to the rule files), or a plugin's own file."""
    env = spec(entry.get("backend")).environment(entry)
    return env if env.endswith((".yaml", ".yml")) else f"{envs}/{env}.yaml"


def packages_of(entry: dict) -> tuple[str, ...]:
    """The distributions whose versions a cell manifest records for the entry's backend: the plugin's
    own package and the packages it declares."""
    declared = spec(entry.get("backend"))
    origin = ORIGINS.get(declared.name)
    own = (origin.distribution,) if origin and origin.distribution else ()
    return tuple(dict.fromkeys([*own, *(d.package for d in declared.requires)]))


def package_versions(name: str) -> dict[str, str | None]:
    """``packages_of`` the backend with their versions here (None: not installed): a generation job
    records them in generation.json, so the cell manifest holds the versions that generated."""
    return {package: plugins.installed_version(package) for package in packages_of({"backend": name})}


def options(entry: dict, where: str = "") -> dict:
    """The entry's backend options: its block laid over the declared defaults."""
    declared = spec(entry.get("backend"), where)
    block = entry.get(declared.key, {})
    if not isinstance(block, dict):
        raise ValueError(f"{where or 'model'}: '{declared.key}' must be a mapping of options, not {block!r}")
    for key in _misplaced(declared, entry):
        raise ValueError(
            f"{where or 'model'}: {key} is an option of backend {declared.name}: it lives under {declared.key}:"
        )
    return {**declared.defaults, **block}


def _misplaced(declared: BackendSpec, entry: dict) -> list[str]:
    own = declared.options_schema.get("properties", {})
    return [key for key in entry if key in own]


def misplaced_options(config) -> list[str]:
    """Each backend option a config gives at a model entry's top level, as configs did before the
    backend's block: named with the block it lives in."""
    models = config.get("models") if isinstance(config, dict) else None
    misplaced = []
    for name, entry in models.items() if isinstance(models, dict) else ():
        declared = REGISTRY.get(entry.get("backend")) if isinstance(entry, dict) else None
        misplaced += [
            f"field models.{name}.{key}: an option of backend {declared.name}, which lives in its block "
            f"(models.{name}.{declared.key}.{key})"
            for key in (_misplaced(declared, entry) if declared else ())
        ]
    return misplaced


# the transformers options the schema filled in at the top of every model entry before backends were
# declared (main 95f8a77): a study manifest written then holds them, and still audits
FILLED_AT_THE_TOP = ("batch_size", "share_prefill", "decode")


def options_moved(config: dict) -> dict:
    """A manifest's config with each model entry's ``FILLED_AT_THE_TOP`` options moved into its
    backend's block, where its backend takes them (a simulated entry's filled-in batch size goes)."""
    models = config.get("models")
    if not isinstance(models, dict):
        return config
    moved = {}
    for name, entry in models.items():
        declared = REGISTRY.get(entry.get("backend")) if isinstance(entry, dict) else None
        top = [k for k in FILLED_AT_THE_TOP if declared and k in entry]
        if top:
            own = declared.options_schema.get("properties", {})
            block = {k: entry[k] for k in top if k in own} | entry.get(declared.key, {})
            entry = {k: v for k, v in entry.items() if k not in top} | ({declared.key: block} if block else {})
        moved[name] = entry
    return {**config, "models": moved}


def seeds_honoured(entry: dict) -> int | None:
    """The seeds the entry's backend's sampler honours (its declaration's ``seeds``)."""
    return spec(entry.get("backend")).seeds(options(entry))


def check_entry(entry: dict, where: str, dtype: str | None = None) -> None:
    """What the schema cannot say of a model entry (the schema checks the options' types): a
    registered backend, the id and revision it needs, and, given the study's ``dtype``, a torch
    precision for a backend that loads its weights at one. ``where`` names the model in errors."""
    from cotdyn.plan.config import TORCH_DTYPES

    declared = spec(entry.get("backend"), where)
    options(entry, where)
    loads_weights = "dtype" in declared.settings and declared.weights_precision is None
    if dtype is not None and loads_weights and dtype not in TORCH_DTYPES:
        raise ValueError(
            f"{where}: backend {declared.name} loads its weights at a torch precision "
            f"({', '.join(TORCH_DTYPES)}), not dtype '{dtype}'"
        )
    if declared.needs_id and "id" not in entry and "gguf" not in entry:
        raise ValueError(f"{where} needs an 'id' (or 'gguf'), or must be a panel model of the plan")
    if declared.needs_revision and not entry.get("revision"):
        raise ValueError(f"{where}: backend {declared.name} needs a pinned 'revision' (part of every cache key)")


def config_schema(base: dict) -> dict:
    """The config schema (src/cotdyn/plan/config.schema.yaml, loaded) with the registry filled in:
    the model entry's ``backend`` enum and each backend's options block."""
    schema = copy.deepcopy(base)
    entry = schema["properties"]["models"]["additionalProperties"]
    entry["properties"]["backend"] = {**entry["properties"].get("backend", {}), "enum": list(REGISTRY)}
    for declared in REGISTRY.values():
        entry["properties"][declared.key] = declared.options_schema
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
