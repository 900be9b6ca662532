"""cotdyn's own backends, declared: ``simulated``, ``transformers``, ``vllm``, ``openai_compat``.

Each is one ``register_backend`` declaration (cotdyn.generation.backends.registry), and cotdyn's
package metadata names each build function below as an entry point of group ``cotdyn.backends``
(pyproject.toml), as a lab's plugin package names its own: the registry finds these the way it finds
theirs. A declaration names the backend, how it is built from a model entry, its options and their
schema, the packages it needs (``requires``), the conda environment that runs it (``runs_in``), the
shared settings that mean something to it (``settings``) and what the config checks need to know of
it (what ``cotdyn init`` writes for each: cotdyn.cli.init_backend). Building imports the backend's module lazily: torch and
vLLM load only in a job that uses them.
"""

from __future__ import annotations

from cotdyn.generation.backends.base import Backend
from cotdyn.generation.backends.registry import register_backend
from cotdyn.generation.backends.simulated.planted import MISBEHAVIOUR
from cotdyn.plugins import Dependency

# The versions each backend works with (tests/test_envs.py: its environments and requirements.lock are in range).
TORCH = Dependency("torch", ">=2.13,<2.14", "torch")
TRANSFORMERS = Dependency("transformers", ">=5.19,<6", "transformers")
# vLLM 0.26.0 (torch 2.11) requires transformers >=5.5.3, and the backend runs it (envs/generate-vllm.yaml)
VLLM_TRANSFORMERS = Dependency("transformers", ">=5.5.3,<6", "transformers")
TOKENIZERS = Dependency("tokenizers", ">=0.23,<0.24", "tokenizers")
VLLM = Dependency("vllm", ">=0.26.0,<0.33", "vllm")

_RATE = {"$ref": "#/$defs/rate"}


@register_backend(
    "simulated",
    summary="simulated: planted answers, to try the whole path in a minute",
    options_key="planted",  # its options have always been its planted truth
    options_schema={
        "type": "object",
        "description": "the simulated backend's planted truth and misbehaviour rates (fields of "
        "cotdyn.generation.backends.simulated.Planted; misbehaviour off by default)",
        "additionalProperties": False,
        "properties": {
            "units_median": {"type": "number", "exclusiveMinimum": 0},
            "units_sigma": {"type": "number", "minimum": 0},
            "unit_chars": {"type": "integer", "minimum": 1},
            **{
                name: _RATE
                for name in (
                    "monotone_share",
                    "accuracy_monotone",
                    "accuracy_nonmonotone",
                    "late_switch_share",
                    "null_rate",
                    *MISBEHAVIOUR,
                )
            },
        },
    },
    runs_in="generate-cpu",
    settings=(),  # no weights: neither a device nor a precision means anything to it
)
def build_simulated(entry: dict, options: dict, golds: dict[str, str], benchmark: str | None) -> Backend:
    from cotdyn.generation.backends.simulated import Planted, SimulatedBackend

    return SimulatedBackend(golds or {}, benchmark or "gsm8k", Planted(**options))


_TRANSFORMERS_OPTIONS = {
    "batch_size": {"type": "integer", "minimum": 1, "description": "rows decoded together"},
    "share_prefill": {
        "type": "boolean",
        "description": "prefill each chain's longest prompt once and slice every prefix request's cache from it",
    },
    "decode": {
        "enum": ["compacting", "generate"],
        "description": "compacting drops finished rows from the batch; generate is Hugging Face generate "
        "(the earlier path, same samples)",
    },
}


@register_backend(
    "transformers",
    summary="transformers: CPU or GPU, small models; the embedded SmolLM2-135M unless --model-id",
    options_schema={"type": "object", "additionalProperties": False, "properties": _TRANSFORMERS_OPTIONS},
    defaults={"batch_size": 16, "share_prefill": True, "decode": "compacting"},
    needs_id=True,
    requires=(TORCH, TRANSFORMERS, TOKENIZERS),
    runs_in={"cpu": "generate-cpu", "cuda": "generate-cuda"},  # torch's build for the entry's device
    settings=("device", "dtype"),
)
def build_transformers(entry: dict, options: dict, golds: dict[str, str], benchmark: str | None) -> Backend:
    from cotdyn.generation.backends.transformers import TransformersBackend

    return TransformersBackend(
        entry["id"],
        entry.get("revision"),
        entry.get("dtype", "float32"),
        entry.get("device", "cpu"),
        options["batch_size"],
        options["share_prefill"],
        options["decode"],
    )


def _vllm_schema() -> dict:
    from cotdyn.generation.backends.vllm import BACKEND_SET

    integer = {"type": "integer", "minimum": 1}
    return {
        "type": "object",
        "description": "vllm.LLM arguments. The engine settings below are checked "
        "(cotdyn.generation.backends.vllm.ENGINE_OPTIONS) and, unset, are vLLM's own defaults; any other "
        "EngineArgs field passes through. The settings in effect are recorded in generation.json "
        "(backend.engine_settings)",
        "additionalProperties": True,
        "not": {"anyOf": [{"required": [key]} for key in BACKEND_SET]},
        "properties": {
            "max_num_seqs": {**integer, "description": "sequences decoded at once"},
            "max_num_batched_tokens": {**integer, "description": "tokens (prefill and decode) in one engine step"},
            "enable_chunked_prefill": {"type": "boolean"},
            "cudagraph_capture_sizes": {"type": "array", "minItems": 1, "items": integer},
            "max_cudagraph_capture_size": {**integer, "description": "vLLM's default: min(2 x max_num_seqs, 512)"},
            "enforce_eager": {"type": "boolean", "description": "no CUDA graphs"},
            "gpu_memory_utilization": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "max_model_len": integer,
        },
    }


@register_backend(
    "vllm",
    summary="vllm: the registered panel's path, on a GPU",
    options_schema=_vllm_schema(),
    needs_id=True,
    requires=(VLLM, VLLM_TRANSFORMERS),
    runs_in="generate-vllm",
    settings=("dtype",),  # always on a GPU: the engine picks it
)
def build_vllm(entry: dict, options: dict, golds: dict[str, str], benchmark: str | None) -> Backend:
    from cotdyn.generation.backends.vllm import VLLMBackend

    return VLLMBackend(entry["id"], entry["revision"], entry.get("dtype", "bfloat16"), entry.get("seed", 0), options)


def _listed_precision(options: dict) -> str | None:
    from cotdyn.generation.backends.openai_compat import served_model, served_precision

    return served_precision(served_model(options))


def _served_seeds(server: str) -> int | None:
    from cotdyn.generation.backends.openai_compat import DIALECTS

    return DIALECTS[server].seeds  # the seeds its sampler honours (Dialect.seeds)


@register_backend(
    "openai_compat",
    summary="openai_compat: a model already served by an OpenAI-compatible server (vllm serve, llama-server)",
    options_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["base_url", "model"],
        "properties": {
            "base_url": {
                "type": "string",
                "pattern": "^https?://",
                "description": "the server, e.g. http://127.0.0.1:8000",
            },
            "model": {"type": "string", "description": "the served model's name (its /v1/models id)"},
            "server": {"enum": ["vllm", "llama.cpp"], "description": "whose fields to speak (default vllm)"},
            "concurrency": {
                "type": "integer",
                "minimum": 1,
                "description": "requests in flight (default 1: a server batching several may change their samples)",
            },
            "retries": {"type": "integer", "minimum": 0, "description": "retries of a failed request (default 4)"},
            "backoff_s": {"type": "number", "minimum": 0, "description": "first wait between tries, doubling"},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "one request's limit"},
        },
    },
    # one request in flight: a sample then never depends on the others batched with it, so a resumed
    # or regenerated one equals the first (its cost: benchmarks/llama_server_determinism.py)
    defaults={"server": "vllm", "concurrency": 1, "retries": 4, "backoff_s": 1.0, "timeout_s": 600.0},
    needs_id=True,
    needs_revision=True,
    requires=(TRANSFORMERS, TOKENIZERS),  # the tokenizer only: the model runs on the server
    runs_in="generate-cpu",
    # the server decides the device and the precision: init registers the precision the server lists
    # (a --dtype only where it lists none, as vLLM), and the backend checks it against the server
    settings=("dtype",),
    seeds=lambda options: _served_seeds(options["server"]),
    weights_precision=lambda entry, options: _listed_precision(options),
)
def build_openai_compat(entry: dict, options: dict, golds: dict[str, str], benchmark: str | None) -> Backend:
    from cotdyn.generation.backends.openai_compat import OpenAICompatBackend

    return OpenAICompatBackend(entry["id"], entry.get("revision"), options, entry.get("dtype"))
