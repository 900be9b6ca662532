"""What ``cotdyn init`` writes of the backend: the model entry and the settings its declaration says
mean something to it (``settings`` of cotdyn.generation.backends.registry.BackendSpec), so that no
option that means nothing to the backend is written (issue 50): a served model gets no device, and a
``--dtype`` or ``--device`` it cannot honour is refused, naming the flag.
"""

from __future__ import annotations

from cotdyn.cli.init_checks import InitError


def model_entry(
    backend: str, model_id: str | None, revision: str | None, device: str | None, options: dict | None = None
) -> dict:
    """The config's model entry, as the backend's declaration writes it (``init_entry``), with the
    device where its ``settings`` name one (``device``, else cpu), and ``options`` (--option KEY=VALUE)
    under the backend's own key."""
    from cotdyn.generation.backends import registry

    try:
        declared = registry.spec(backend, "--backend")
        entry = declared.init_entry(model_id, revision, device)
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
    declared, device: str | None, dtype: str | None, options: dict | None = None
) -> tuple[str | None, str | None]:
    """(device, study dtype) as the backend's declaration takes them: a --device or --dtype that means
    nothing to it is refused; a served model's dtype is what its server lists (``served_dtype``); else
    the dtype defaults to the backend's ``cpu_dtype`` on a CPU (else the plan's)."""
    for flag, value in (("device", device), ("dtype", dtype)):
        if value is not None and flag not in declared.settings:
            takes = ", ".join(f"--{s}" for s in declared.settings) or "neither --device nor --dtype"
            raise InitError(f"--{flag} {value}: means nothing to backend {declared.name} (it takes {takes})")
    if declared.served_precision is not None:
        return device, served_dtype(declared, options or {}, dtype)
    if "device" in declared.settings:
        device = device or "cpu"
    if "dtype" in declared.settings and dtype is None and device == "cpu":
        dtype = declared.cpu_dtype
    return device, dtype


def served_dtype(declared, options: dict, dtype: str | None) -> str:
    """The precision a served model runs at, as its server lists it (llama-server: "Q4_1"); a
    ``--dtype`` only where the server lists none (vLLM), or cannot be asked now, and never one that
    contradicts what it lists. The registered plan's precision means nothing to a served model."""
    from cotdyn.generation.backends import registry

    base_url = options.get("base_url", "(no base_url option)")
    try:
        asked = registry.options({"backend": declared.name, declared.key: options})
        # one question, now: a server that is not up is said at once, not after the run's retries
        listed = declared.served_precision({**asked, "retries": 0, "timeout_s": 30.0})
    except Exception as e:  # no server there, or it serves no such model: the error names it
        if dtype is not None:
            return dtype
        raise InitError(
            f"cannot ask {base_url} for the precision it serves ({type(e).__name__}: {e}): start the server "
            "first, or give the precision it serves with --dtype"
        ) from None
    if listed is None and dtype is None:
        raise InitError(
            f"{base_url} does not list the precision it serves: give it with --dtype (the server's own "
            "setting, such as vLLM's --dtype)"
        )
    if listed is not None and dtype is not None and dtype != listed:
        raise InitError(f"--dtype {dtype}: {base_url} serves the model at {listed}")
    return listed or dtype
