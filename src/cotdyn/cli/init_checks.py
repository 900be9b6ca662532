"""What ``cotdyn init`` checks before it writes a study (issue 53): every value typed and in range,
the model found now, not at the first run.

- ``--protocol KEY=VALUE`` values are read as YAML (``parse_setting``) and the plan about to be written
  is held to the config schema's protocol definition and a positive small-group rule
  (``cotdyn.plan.schema.validate_plan``, which ``cotdyn register`` and every run apply too);
- the config about to be written is validated by the workflow's schema (``check_config``);
- the model id is resolved (``resolve_model``): a local folder must hold a model (``config.json``; a
  served model's tokenizer folder, a tokenizer file), and a hub id must be in the Hugging Face cache, at
  its revision where one is pinned. With ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set nothing
  else is tried; otherwise the hub is asked once, with a short timeout and no retries. A wrong id is
  named at once, with the cached ids it resembles.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import yaml

from cotdyn.plan.schema import SCHEMA

TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub's reading of a boolean variable
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
HUB_ID = re.compile(r"^(?!.*(--|\.\.))[A-Za-z0-9_][\w.-]{0,95}(/[A-Za-z0-9_][\w.-]{0,95})?$")
WEIGHTS_FILES = ("config.json",)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
HUB_TIMEOUT_S = 10


class InitError(ValueError):
    pass


def parse_setting(text: str, flag: str = "--protocol") -> tuple[str, object]:
    """``key=value`` with the value read as YAML (``80`` an int, ``null`` None, ``drop`` a string)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InitError(f"{flag} {text!r}: expected key=value")
    try:
        return key, yaml.safe_load(value)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or type(e).__name__
        raise InitError(f"{flag} {key}: the value is not plain YAML ({problem})") from None


def check_plan_values(plan: dict, given: dict, min_group_size: int | None) -> None:
    """The plan about to be written, typed and in range (``validate_plan``); an error names the flag
    that set the value (``--protocol m``, ``--min-group-size``) where one did."""
    from cotdyn.plan.config import ConfigError
    from cotdyn.plan.schema import validate_plan

    if min_group_size is not None and min_group_size < 1:
        raise InitError(f"--min-group-size {min_group_size}: a group needs at least 1 problem")
    for key, value in given.items():  # each flag alone first, so the error names it
        try:
            validate_plan({"protocol": {key: value}}, f"--protocol {key}={value}")
        except ConfigError as e:
            raise InitError(str(e).replace(f": protocol.{key}: ", ": ", 1)) from None
    try:
        validate_plan(plan, "the plan cotdyn init would write")
    except ConfigError as e:
        raise InitError(str(e)) from None


def check_config(config: dict, schema_path: Path = SCHEMA) -> None:
    """The config about to be written, against the workflow's schema with the backend registry filled
    in, so that a bad --option is refused now, naming its key, not at the first run."""
    import jsonschema

    from cotdyn.generation.backends.registry import config_schema

    if not schema_path.is_file():  # an installed package without the workflow: snakemake checks it
        return
    schema = config_schema(yaml.safe_load(schema_path.read_text()))
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "config"
        raise InitError(f"{where}: {error.message}")


def registered_plan_of(path: str):
    """The plan whose protocol and analysis are copied, or a named error."""
    from cotdyn.plan.load import load_plan

    try:
        return load_plan(path)
    except (OSError, ValueError) as e:
        raise InitError(f"--registered-plan {path}: {e}") from None


# --- the model id ---------------------------------------------------------------------------------


def offline() -> bool:
    """Whether the Hugging Face libraries are told to stay offline (read now, not at import)."""
    return any(os.environ.get(v, "").strip().upper() in TRUE for v in OFFLINE_VARIABLES)


def hub_cache() -> Path:
    """The Hugging Face hub cache, as huggingface_hub finds it: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
    HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "huggingface" / "hub"


def _holds(folder: Path, files: tuple[str, ...]) -> bool:
    return any((folder / name).is_file() for name in files)


def cached_snapshot(cache: Path, model_id: str, revision: str | None) -> Path | None:
    """The cache's snapshot folder of ``model_id`` at ``revision`` (a branch or tag through refs/, or a
    commit), else at main, else any; None where the cache has none."""
    repo = cache / f"models--{model_id.replace('/', '--')}"
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    wanted = revision or "main"
    ref = repo / "refs" / wanted
    commit = ref.read_text().strip() if ref.is_file() else wanted
    if (snapshots / commit).is_dir():
        return snapshots / commit
    if revision is None:
        found = sorted(p for p in snapshots.iterdir() if p.is_dir())
        return found[0] if found else None
    return None


def cached_ids(cache: Path) -> list[str]:
    if not cache.is_dir():
        return []
    return [p.name[len("models--") :].replace("--", "/") for p in cache.iterdir() if p.name.startswith("models--")]


def _hint(model_id: str, cache: Path) -> str:
    snapshots = cache / f"models--{model_id.replace('/', '--')}" / "snapshots"
    if snapshots.is_dir():
        held = sorted(p.name for p in snapshots.iterdir() if p.is_dir())
        return f"the cache holds it at {', '.join(held[:3]) or 'no revision'}: pin one of those, or fetch that revision"
    close = difflib.get_close_matches(model_id, cached_ids(cache), n=3, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(close)} (in the cache)?"
    return "check the id's spelling, or give a local model folder"


def _looks_like_a_path(text: str) -> bool:
    return text.startswith(("/", "./", "../", "~")) or text.endswith("/") or text.count("/") > 1


def resolve_model(model_id: str, revision: str | None, tokenizer_only: bool = False) -> str:
    """Where ``model_id`` is found, in words; InitError naming it and what to do otherwise (see the
    module docstring). ``tokenizer_only``: a served model's id, of which only the tokenizer is read
    here (its revision is a declared label, not a hub commit)."""
    needed = TOKENIZER_FILES + WEIGHTS_FILES if tokenizer_only else WEIGHTS_FILES
    what = "a tokenizer" if tokenizer_only else "a model (config.json)"
    folder = Path(model_id).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise InitError(f"--model-id {model_id}: a file, not a model folder")
        if not _holds(folder, needed):
            raise InitError(
                f"--model-id {model_id}: the folder holds no {what} (expected {' or '.join(needed)}; "
                "hint: save_pretrained writes them)"
            )
        return f"local folder {folder}"
    if _looks_like_a_path(model_id):
        raise InitError(f"--model-id {model_id}: no such folder")
    if not HUB_ID.fullmatch(model_id):
        raise InitError(f"--model-id {model_id!r}: neither a local folder nor a hub id (owner/name)")
    cache = hub_cache()
    hub_revision = None if tokenizer_only else revision
    snapshot = cached_snapshot(cache, model_id, hub_revision)
    if snapshot is not None and _holds(snapshot, needed):
        return f"the Hugging Face cache ({snapshot})"
    at = f" at revision {hub_revision}" if hub_revision else ""
    if offline():
        variable = next(v for v in OFFLINE_VARIABLES if os.environ.get(v, "").strip().upper() in TRUE)
        raise InitError(
            f"--model-id {model_id}: not a local folder, and not in the Hugging Face cache {cache}{at}; "
            f"{variable} is set, so nothing is downloaded: {_hint(model_id, cache)}"
        )
    return _ask_the_hub(model_id, hub_revision, cache, at)


def _ask_the_hub(model_id: str, revision: str | None, cache: Path, at: str) -> str:
    """One request to the hub, HUB_TIMEOUT_S at most, no retries."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError
    except ImportError:
        return "not checked (huggingface_hub is not installed)"
    try:
        HfApi().model_info(model_id, revision=revision, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return "the hub (a gated model: log in with huggingface-cli login before the run)"
    except RevisionNotFoundError:
        raise InitError(f"--model-id {model_id}: the hub has no revision {revision} of it") from None
    except RepositoryNotFoundError:
        raise InitError(f"--model-id {model_id}: no such model on the hub: {_hint(model_id, cache)}") from None
    except Exception as e:  # noqa: BLE001 (a network failure of any kind: named, never a traceback)
        raise InitError(
            f"--model-id {model_id}: not in the Hugging Face cache {cache}{at}, and the hub could not be asked "
            f"({type(e).__name__}); on a machine without network set HF_HUB_OFFLINE=1 and give a local folder "
            "or a cached id"
        ) from None
    return "the hub"
