"""The vLLM backend: the registered panel's path (docs/reference.md section 8).

One phase is one ``LLM.generate`` call: every request goes in at once, as token ids, with its own
``SamplingParams`` (n = m samples, its own seed), and vLLM's scheduler with prefix caching shares
the KV cache of the common chat prompt and of a chain's earlier prefixes. Never one call per
prefix (the original harness's pattern).

Every sampling field is written out (``wanted_sampling``), and the engine is built with
``generation_config="vllm"``, so a model's own generation_config (its temperature, top_p, top_k,
repetition penalty) never applies (docs/reference.md section 4). vLLM gives sample i of a request seeded s
the seed s + i, which is the convention of ``cotdyn.protocol.seeds``.

Supported: vLLM 0.26.0 (requires torch 2.11.0, transformers >= 5.5.3) through the pinned 0.32.0
(envs/generate-vllm.yaml; torch 2.13.0, transformers >= 5.16.1, < 5.20). The fields are fitted to
the installed ``SamplingParams`` (``fit_to_fields``): a field the installed version lacks is left
out, and listed as ``omitted_fields`` in generation.json and the cell manifest, only where the
value written is its "off" value (``OFF``), so that leaving it out changes nothing the protocol
reads; a field the protocol needs at any other value is an error naming the field and the
version. 0.26.0 lacks ``watermarking`` (0.32.0 has it, where None means "the engine's watermark,
if one is configured"); with it left out, 0.26.0 ran the backend with no other change on an H200
(2026-12-01). Checked in both releases' sources: ``SamplingParams.top_k`` reads 0 as "consider
all tokens" (-1 is also accepted), the protocol's own "0 = off", so top_k is passed unchanged;
and ``vllm/v1/engine/parallel_sampling.py`` gives child i of a request seeded s the seed s + i.

Engine settings. A model entry's ``vllm:`` mapping is handed to ``vllm.LLM`` as keywords; the
settings that decide throughput are named (``ENGINE_OPTIONS``) and their types checked here, with
an error naming the model and the key, before an engine is built; any other key (another
``EngineArgs`` field, e.g. ``load_format``, ``tensor_parallel_size``) passes through unchecked.
Verified in the sources of both releases (the wheels of 0.26.0 and 0.32.0, 2026-12-01):
``LLM.__init__`` passes its ``**kwargs`` to ``EngineArgs`` (vllm/entrypoints/llm.py), whose fields
include ``max_num_seqs``, ``max_num_batched_tokens``, ``enable_chunked_prefill``, ``enforce_eager``,
``gpu_memory_utilization``, ``max_model_len`` and, for CUDA graphs, ``cudagraph_capture_sizes`` and
``max_cudagraph_capture_size`` (vllm/engine/arg_utils.py; these two are copied into the
``CompilationConfig``, and naming one both there and in ``compilation_config={...}`` is an error
in vLLM). Neither release has ``cuda_graph_sizes``. Unset, ``max_num_seqs`` and
``max_num_batched_tokens`` take vLLM's per-device defaults (``EngineArgs.get_batch_defaults``:
1024 and 16384 for the ``LLM`` class on an H100/H200 in both releases), and CUDA graphs are
captured up to min(2 x max_num_seqs, 512) sequences (``VllmConfig._set_cudagraph_sizes``), so a
decode batch above 512 runs without one.

What the engine made of them is read back from it (``engine_settings``): ``llm.llm_engine`` is a
``vllm.v1.engine.llm_engine.LLMEngine`` holding ``vllm_config``, whose ``scheduler_config``,
``compilation_config``, ``model_config`` and ``cache_config`` carry the settings
(vllm/config/{scheduler,compilation,model,cache}.py; ``cache_config.num_gpu_blocks`` is synced
back from the engine-core process, vllm/v1/engine/core_client.py). A path the installed release
lacks is recorded as "not exposed by vllm <version>".

vLLM is imported lazily: it needs CUDA and is absent from the CPU environments.
"""

from __future__ import annotations

import enum
from contextlib import contextmanager
from typing import Sequence

from cotdyn.generation.backends.base import Completion, Request, Sampling
from cotdyn.protocol.prompts import ChatTokenizer


class VLLMBackend:
    name = "vllm"

    def __init__(self, model_id: str, revision: str, dtype: str = "bfloat16", seed: int = 0, extra: dict | None = None):
        if not revision:
            raise ValueError(f"vllm backend: model '{model_id}' needs a pinned revision")
        self.extra = engine_options(extra or {}, f"model '{model_id}'")
        import vllm

        self.model_id, self.model_revision, self.dtype, self.seed = model_id, revision, dtype, seed
        self.vllm_version = getattr(vllm, "__version__", "unknown")
        self.fields = sampling_fields(vllm.SamplingParams)
        self._vllm = vllm
        self.llm = vllm.LLM(
            model=model_id,
            revision=revision,
            tokenizer_revision=revision,
            dtype=dtype,
            seed=seed,
            enable_prefix_caching=True,
            generation_config="vllm",
            **self.extra,
        )
        hf_tokenizer = self.llm.get_tokenizer()
        self.tokenizer = ChatTokenizer(hf_tokenizer)
        self.stop_ids = stop_token_ids(hf_tokenizer, _model_eos_ids(model_id, revision))

    def wanted_sampling(self, sampling: Sampling, n: int, seed: int) -> dict:
        """Every SamplingParams field that affects what is sampled, explicit: each field at its
        "off" value (``OFF``) but those the protocol sets."""
        return {
            **OFF,
            "n": n,
            "seed": seed,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "repetition_penalty": sampling.repetition_penalty,
            "max_tokens": sampling.max_tokens,
            "stop_token_ids": list(self.stop_ids),
        }

    def sampling_params(self, sampling: Sampling, n: int, seed: int) -> dict:
        """The SamplingParams keywords for the installed vLLM (``fit_to_fields``)."""
        return fit_to_fields(self.wanted_sampling(sampling, n, seed), self.fields, self.vllm_version)[0]

    def effective_sampling(self, sampling: Sampling) -> dict:
        """The SamplingParams fields built for ``sampling`` (n and seed vary per request), and the
        fields left out because the installed vLLM lacks them."""
        fields, omitted = fit_to_fields(self.wanted_sampling(sampling, n=1, seed=0), self.fields, self.vllm_version)
        fields["n"], fields["seed"] = "per request (m)", "per request (cotdyn.protocol.seeds; sample j: seed + j)"
        return {
            "sampler": f"vllm {self.vllm_version}",
            "generation_config": "vllm",
            **fields,
            "omitted_fields": omitted,
        }

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "vllm_version": self.vllm_version,
            "model_id": self.model_id,
            "revision": self.model_revision,
            "dtype": self.dtype,
            "device": "cuda",
            "engine_seed": self.seed,
            "engine_extra": self.extra,
            "engine_settings": engine_settings(self.llm, self.vllm_version),
            "prefix_caching": True,
            "stop_token_ids": list(self.stop_ids),
            "chat_template_sha256": self.tokenizer.template_sha256(),
            "tokenizer_sha256": self.tokenizer.vocab_sha256(),
        }

    def generate(self, requests: Sequence[Request], desc: str = "", done=None, on_done=None) -> list[list[Completion]]:
        """One ``llm.generate`` call for the requests with a sample not ``done``; completions in request order.

        ``on_done`` hears of each request the engine step it finishes (``_told_as_finished``), so a
        kill loses the requests in flight, not the chunk. A resumed call sends only the requests a
        journal does not hold whole: vLLM seeds each sample on its own (seed + j), and on a GPU
        its bits are not reproducible run to run in any case (README), so a smaller batch gives
        what a full one would, up to that.
        """
        if not requests:
            return []
        done = done or {}
        pending = [i for i, r in enumerate(requests) if any((i, j) not in done for j in range(r.n))]
        out = [[done[(i, j)] for j in range(r.n)] if i not in pending else None for i, r in enumerate(requests)]
        if not pending:
            return out  # type: ignore[return-value]
        prompts = [{"prompt_token_ids": list(requests[i].prompt_ids)} for i in pending]
        params = [
            self._vllm.SamplingParams(**self.sampling_params(r.sampling, r.n, r.seed))
            for r in (requests[i] for i in pending)
        ]
        told: set[int] = set()
        with _told_as_finished(self.llm, lambda k, o: self._tell(requests, pending[k], o, done, told, on_done)):
            outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=True)
        if len(outputs) != len(pending):
            raise RuntimeError(f"vllm returned {len(outputs)} outputs for {len(pending)} requests")
        for i, o in zip(pending, outputs):
            out[i] = self._completions(o, requests[i])
            if i not in told:  # a request the engine's steps did not report (another engine loop)
                self._tell(requests, i, o, done, told, on_done)
        return out  # type: ignore[return-value]

    def _tell(self, requests, i: int, output, done, told: set[int], on_done) -> None:
        """Tell ``on_done`` of request i's samples not ``done`` (once), from its finished output."""
        if i in told or list(output.prompt_token_ids or []) != list(requests[i].prompt_ids):
            return  # told already, or an output that is not this request's: told at the end instead
        told.add(i)
        if on_done is not None:
            cs = self._completions(output, requests[i])
            on_done([(i, j, c) for j, c in enumerate(cs) if (i, j) not in done])

    def _completions(self, output, request: Request) -> list[Completion]:
        samples = sorted(output.outputs, key=lambda c: c.index)
        if len(samples) != request.n:
            raise RuntimeError(f"vllm returned {len(samples)} samples for a request with n={request.n}")
        return [completion(list(s.token_ids), s.finish_reason, self.stop_ids, self.tokenizer.decode) for s in samples]


@contextmanager
def _told_as_finished(llm, tell):
    """While ``llm.generate`` runs, ``tell(k, output)`` of the k-th request added, the engine step it finishes.

    ``LLM.generate`` adds the prompts in order through ``llm.llm_engine.add_request(request_id, ...)``
    and then loops ``llm.llm_engine.step()``, keeping the outputs whose ``finished`` is set, until
    none is left (``_add_request`` and ``_run_engine``: vllm/entrypoints/common/offline.py in 0.32.0,
    vllm/entrypoints/offline_utils.py in 0.26.0, read in both wheels on 2026-12-06;
    ``RequestOutput.request_id`` is the id passed to ``add_request``, the engine's own id adding a
    random suffix). Both are wrapped on the engine instance for the call and unwrapped after: the
    requests, their order and the engine's batches are those of the plain call.
    """
    engine = getattr(llm, "llm_engine", None)
    names = ("add_request", "step")
    if not all(callable(getattr(engine, name, None)) for name in names) or not hasattr(engine, "__dict__"):
        yield  # an engine without them: told at the end
        return
    own = {name: vars(engine)[name] for name in names if name in vars(engine)}
    added: dict[str, int] = {}
    add_request, step = engine.add_request, engine.step

    def adding(request_id, *args, **kwargs):
        added.setdefault(str(request_id), len(added))
        return add_request(request_id, *args, **kwargs)

    def stepping(*args, **kwargs):
        outputs = step(*args, **kwargs)
        for output in outputs:
            if getattr(output, "finished", False) and str(getattr(output, "request_id", None)) in added:
                tell(added[str(output.request_id)], output)
        return outputs

    engine.add_request, engine.step = adding, stepping
    try:
        yield
    finally:
        for name in names:  # the engine's own methods again
            if name in own:
                setattr(engine, name, own[name])
            else:
                delattr(engine, name)


# The engine settings a model entry's ``vllm:`` may name, and the type each must have: a number of
# sequences or tokens is a positive integer (a YAML bool is not one), a switch is a bool.
def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


ENGINE_OPTIONS = {
    "max_num_seqs": (_positive_int, "a positive integer"),
    "max_num_batched_tokens": (_positive_int, "a positive integer"),
    "enable_chunked_prefill": (lambda v: isinstance(v, bool), "true or false"),
    "cudagraph_capture_sizes": (
        lambda v: isinstance(v, list) and len(v) > 0 and all(_positive_int(x) for x in v),
        "a non-empty list of positive integers",
    ),
    "max_cudagraph_capture_size": (_positive_int, "a positive integer"),
    "enforce_eager": (lambda v: isinstance(v, bool), "true or false"),
    "gpu_memory_utilization": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1,
        "a number in (0, 1]",
    ),
    "max_model_len": (_positive_int, "a positive integer"),
}
# Set by the backend itself (the protocol's pinned revision, dtype and seed; prefix caching and
# vLLM's own generation defaults): a model entry must not override them.
BACKEND_SET = ("model", "revision", "tokenizer_revision", "dtype", "seed", "enable_prefix_caching", "generation_config")
# What describe() reads back from the built engine: a setting and its path under
# ``llm.llm_engine.vllm_config`` (the same in 0.26.0 and 0.32.0; see the module docstring).
ENGINE_SETTINGS = {
    "max_num_seqs": ("scheduler_config", "max_num_seqs"),
    "max_num_batched_tokens": ("scheduler_config", "max_num_batched_tokens"),
    "enable_chunked_prefill": ("scheduler_config", "enable_chunked_prefill"),
    "cudagraph_mode": ("compilation_config", "cudagraph_mode"),
    "cudagraph_capture_sizes": ("compilation_config", "cudagraph_capture_sizes"),
    "max_cudagraph_capture_size": ("compilation_config", "max_cudagraph_capture_size"),
    "enforce_eager": ("model_config", "enforce_eager"),
    "max_model_len": ("model_config", "max_model_len"),
    "gpu_memory_utilization": ("cache_config", "gpu_memory_utilization"),
    "enable_prefix_caching": ("cache_config", "enable_prefix_caching"),
    "block_size": ("cache_config", "block_size"),
    "num_gpu_blocks": ("cache_config", "num_gpu_blocks"),
}


def engine_options(options: dict, where: str) -> dict:
    """A model entry's ``vllm:`` mapping, checked: each named engine setting (``ENGINE_OPTIONS``) of
    its type, none of the keywords the backend sets itself, CUDA graph settings named once. Other
    keys pass through to ``vllm.LLM`` as they are. ``where`` names the model in errors."""
    if not isinstance(options, dict):
        raise ValueError(f"{where}: 'vllm' must be a mapping of vllm.LLM arguments, not {options!r}")
    for key, value in options.items():
        if key in BACKEND_SET:
            raise ValueError(f"{where}: vllm.{key} is set by the backend (the protocol's own); remove it")
        if key in ENGINE_OPTIONS and not ENGINE_OPTIONS[key][0](value):
            raise ValueError(f"{where}: vllm.{key} must be {ENGINE_OPTIONS[key][1]}, not {value!r}")
    compilation = options.get("compilation_config")
    if isinstance(compilation, dict):
        for key in ("cudagraph_capture_sizes", "max_cudagraph_capture_size"):
            if key in options and key in compilation:
                raise ValueError(f"{where}: vllm.{key} and vllm.compilation_config.{key} are both set; name it once")
    # Whether cudagraph_capture_sizes and max_cudagraph_capture_size agree depends on
    # max_num_batched_tokens (vLLM drops the sizes above it first); vLLM checks that itself, in
    # VllmConfig, before any weights load.
    return dict(options)


def engine_settings(llm, version: str) -> dict:
    """The engine settings in effect (``ENGINE_SETTINGS``), read from the built engine; a path the
    installed vLLM does not have is recorded as such, never guessed."""
    absent = f"not exposed by vllm {version}"
    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    settings = {}
    for name, (part, field) in ENGINE_SETTINGS.items():
        holder = getattr(config, part, None)
        settings[name] = _plain(getattr(holder, field)) if hasattr(holder, field) else absent
    return settings


def _plain(value):
    """A setting as JSON holds it: an enum (e.g. CUDAGraphMode) by its name."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# The value at which each field the backend writes changes nothing the protocol reads: with it, a
# vLLM that lacks the field samples the same ids. detokenize and skip_special_tokens shape only
# vLLM's own text, which the backend never reads (text is decode(ids)). n, seed, temperature,
# max_tokens and stop_token_ids have no such value: a vLLM without them cannot run the protocol.
OFF = {
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "min_tokens": 0,
    "stop": [],
    "ignore_eos": False,
    "include_stop_str_in_output": False,
    # Text is decode(ids) in every backend, so vLLM's incremental detokenizer is not used.
    "detokenize": False,
    "skip_special_tokens": True,
    "logprobs": None,
    "prompt_logprobs": None,
    "bad_words": [],
    "logit_bias": None,
    "allowed_token_ids": None,
    "watermarking": False,  # None would mean "the engine's watermark, if one is configured"
}


def sampling_fields(params_class) -> frozenset[str]:
    """The keyword fields the installed ``vllm.SamplingParams`` accepts: its msgspec struct's fields
    (vLLM 0.26.0 through 0.32.0)."""
    return frozenset(params_class.__struct_fields__)


def fit_to_fields(wanted: dict, fields: frozenset[str], version: str) -> tuple[dict, list[str]]:
    """``wanted`` without the fields the installed vLLM lacks, and their names; an error when a
    missing field is wanted at anything but its "off" value (``OFF``)."""
    missing = sorted(set(wanted) - fields)
    for name in missing:
        if name not in OFF or wanted[name] != OFF[name]:
            raise RuntimeError(
                f"vllm {version}: SamplingParams has no field '{name}', which the protocol "
                f"needs at {wanted[name]!r} (supported: vLLM 0.26.0 through 0.32.0)"
            )
    return {k: v for k, v in wanted.items() if k not in missing}, missing


def completion(ids: list[int], finish_reason: str, stop_ids: Sequence[int], decode) -> Completion:
    """A vLLM sample as a Completion: the stop token stripped, finish reason "stop" | "length"."""
    if finish_reason not in ("stop", "length"):
        raise RuntimeError(f"vllm finish_reason '{finish_reason}' (expected 'stop' or 'length')")
    if finish_reason == "stop" and ids and ids[-1] in stop_ids:
        ids = ids[:-1]
    return Completion(tuple(ids), decode(ids), finish_reason)


def stop_token_ids(hf_tokenizer, model_eos: Sequence[int]) -> tuple[int, ...]:
    """The tokenizer's EOS plus the model's own EOS ids (e.g. Llama 3.1's <|eot_id|>), sorted."""
    ids = set(model_eos)
    if hf_tokenizer.eos_token_id is not None:
        ids.add(int(hf_tokenizer.eos_token_id))
    return tuple(sorted(ids))


def _model_eos_ids(model_id: str, revision: str) -> list[int]:
    """EOS ids from the model's generation_config at the pinned revision (stop tokens only: none of
    its sampling defaults are read). A model without one stops at the tokenizer's EOS."""
    from transformers import GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(model_id, revision=revision).eos_token_id
    except OSError:
        return []
    return [int(i) for i in (eos if isinstance(eos, list) else [eos]) if i is not None]
