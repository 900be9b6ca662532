"""Generation backends behind one interface (docs/design.md section 8): ``simulated``, ``transformers``, ``vllm``."""

from __future__ import annotations

from cotdyn.generation.backends.base import Backend, Completion, GenerationStats, Request, Sampling

BACKENDS = ("simulated", "transformers", "vllm")


def make_backend(model: dict, golds: dict[str, str] | None = None, benchmark: str | None = None) -> Backend:
    """Build the backend a config's model entry names.

    ``model`` holds ``backend`` and, for real models, ``id`` (hub id or local directory),
    ``revision``, ``dtype``, ``device``; the simulated model needs the problems' golds.
    """
    kind = model.get("backend")
    if kind == "simulated":
        from cotdyn.generation.backends.simulated import Planted, SimulatedBackend

        return SimulatedBackend(golds or {}, benchmark or "gsm8k", Planted(**model.get("planted", {})))
    if kind == "transformers":
        from cotdyn.generation.backends.transformers import TransformersBackend

        return TransformersBackend(
            model["id"],
            model.get("revision"),
            model.get("dtype", "float32"),
            model.get("device", "cpu"),
            model.get("batch_size", 16),
            model.get("share_prefill", True),
            model.get("decode", "compacting"),
        )
    if kind == "vllm":
        from cotdyn.generation.backends.vllm import VLLMBackend

        return VLLMBackend(
            model["id"], model["revision"], model.get("dtype", "bfloat16"), model.get("seed", 0), model.get("vllm", {})
        )
    raise ValueError(f"unknown backend '{kind}' (known: {', '.join(BACKENDS)})")


__all__ = ["Backend", "Completion", "GenerationStats", "Request", "Sampling", "make_backend", "BACKENDS"]
