"""Generation backends behind one interface (docs/reference.md section 8).

Each backend is one declaration (``register_backend``, cotdyn.generation.backends.registry): its
name, how it is built from a model entry, its options block and their schema, the packages it needs,
its conda environment, and what the config checks, ``cotdyn init`` and the workflow need
to know of it. Nothing else names a backend. The registry finds backends through packaging entry
points (group ``cotdyn.backends``): cotdyn's own (``simulated``, ``transformers``, ``vllm``,
``openai_compat``, declared in cotdyn.generation.backends.builtin) as any lab's plugin package.
Building imports the backend's module lazily: torch and vLLM load only in a job that uses them.
"""

from __future__ import annotations

from cotdyn.generation.backends import registry
from cotdyn.generation.backends.base import Backend, Completion, GenerationStats, Request, Sampling
from cotdyn.generation.backends.registry import REGISTRY, register_backend, torch_environment
from cotdyn.generation.backends.registry import options as backend_options
from cotdyn.generation.backends.registry import spec as backend_spec


def make_backend(model: dict, golds: dict[str, str] | None = None, benchmark: str | None = None) -> Backend:
    """Build the backend a config's model entry names (its declaration's ``build``), with the
    entry's options (``registry.options``), once the packages it declares are found in range (a
    ``MissingDependency`` names the one that is not); the simulated model needs the problems' golds."""
    declared = backend_spec(model.get("backend"))
    registry.check_requires(declared)
    return declared.build(model, backend_options(model, f"model '{model.get('id', declared.name)}'"), golds, benchmark)


# cotdyn's own declarations, imported whatever the installed metadata says (a job runs the checkout's
# src, PYTHONPATH, in an environment whose metadata may predate it; a job's code hash,
# cotdyn.provenance.code, follows imports, not entry points); then every plugin, through entry points
from cotdyn.generation.backends import builtin  # noqa: E402, F401 (it registers as it is imported)

registry.discover()
BACKENDS = tuple(REGISTRY)  # the backends found as cotdyn was imported (a test may register more: read REGISTRY)

__all__ = [
    "BACKENDS",
    "Backend",
    "Completion",
    "GenerationStats",
    "REGISTRY",
    "Request",
    "Sampling",
    "backend_options",
    "backend_spec",
    "make_backend",
    "register_backend",
    "torch_environment",
]
