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


def settings_of(declared, device: str | None, dtype: str | None) -> tuple[str | None, str | None]:
    """(device, study dtype) as the backend's declaration takes them: a --device or --dtype that means
    nothing to it is refused; the dtype defaults to its ``cpu_dtype`` on a CPU (else the plan's)."""
    for flag, value in (("device", device), ("dtype", dtype)):
        if value is not None and flag not in declared.settings:
            takes = ", ".join(f"--{s}" for s in declared.settings) or "neither --device nor --dtype"
            raise InitError(f"--{flag} {value}: means nothing to backend {declared.name} (it takes {takes})")
    if "device" in declared.settings:
        device = device or "cpu"
    if "dtype" in declared.settings and dtype is None and device == "cpu":
        dtype = declared.cpu_dtype
    return device, dtype
