"""A stand-in ``vllm`` module for CPU checks of the vLLM backend (tests, ``gpu_check_vllm.py --dry-run``).

vLLM needs CUDA, so this module records every call the backend makes (how the engine is built,
each ``generate`` call's prompts and SamplingParams) and answers like vLLM where the backend
relies on it: sample i of a request seeded s is drawn with s + i
(vllm/v1/engine/parallel_sampling.py), samples may come back in any order (each carries its
index), a sample that stops keeps its stop token, and ``SamplingParams`` is a struct with a fixed
set of fields that refuses any other keyword (msgspec's ``__struct_fields__``, as in vLLM 0.26.0
through 0.32.0). ``module(fields=...)`` builds an older or newer vLLM's field set.

The built engine exposes its settings where vLLM 0.26.0 and 0.32.0 do,
``llm.llm_engine.vllm_config.{scheduler,compilation,model,cache}_config`` (``vllm_config``), so
that the backend's record of them (``describe()["engine_settings"]``) is checked against the same
structure; ``module(engine_config=False)`` builds a vLLM without it.

The "model" writes a short reference chain (three blank-line units and an answer) when given a
chain's budget (>= 600 tokens), otherwise a one-line answer, or, for one seed in 11, text that runs
to its token budget. Its tokenizer is byte-level and reproduces Llama-3's double-BOS trap.
"""

from __future__ import annotations

import enum
import types
from dataclasses import dataclass

BOS, EOS, EOT = 1, 2, 3  # EOT: a second stop id a model's generation_config may name (like <|eot_id|>)

# The public fields of vLLM 0.32.0's SamplingParams (vllm/sampling_params.py; those named _* left out).
FIELDS_0_32 = (
    "n",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "temperature",
    "watermarking",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "max_tokens",
    "min_tokens",
    "logprobs",
    "prompt_logprobs",
    "prompt_logprob_token_ids",
    "prompt_logprob_start",
    "logprob_token_ids",
    "flat_logprobs",
    "detokenize",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "include_stop_str_in_output",
    "output_kind",
    "stream_interval",
    "skip_clone",
    "output_text_buffer_length",
    "structured_outputs",
    "logit_bias",
    "allowed_token_ids",
    "extra_args",
    "bad_words",
    "skip_reading_prefix_cache",
    "thinking_token_budget",
    "repetition_detection",
    "routed_experts_prompt_start",
    "trace_decode_token_ids",
)
# vLLM 0.26.0 has neither watermarking nor the prompt-logprob selectors, stream_interval or trace ids.
FIELDS_0_26 = tuple(
    f
    for f in FIELDS_0_32
    if f
    not in (
        "watermarking",
        "prompt_logprob_token_ids",
        "prompt_logprob_start",
        "stream_interval",
        "trace_decode_token_ids",
    )
)


class StandInTokenizer:
    """Byte-level ids shifted past the special ids; a template that writes BOS itself while the
    tokenizer adds one too (Llama-3's double-BOS trap)."""

    name_or_path = "stand-in"
    bos_token_id, eos_token_id, pad_token_id = BOS, EOS, None
    chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"

    def encode(self, text: str) -> list[int]:
        return [b + 10 for b in text.encode()]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return bytes(i - 10 for i in ids if i >= 10).decode(errors="replace")

    def apply_chat_template(self, messages, add_generation_prompt: bool, tokenize: bool):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        return [BOS, BOS] + self.encode(text)

    def get_vocab(self) -> dict:
        return {f"<{i}>": i for i in range(266)}


@dataclass
class Sample:
    index: int
    token_ids: list
    finish_reason: str


@dataclass
class Output:
    outputs: list
    request_id: str = ""
    prompt_token_ids: list | None = None
    finished: bool = True


class Engine:
    """``llm.llm_engine``'s loop as ``LLM.generate`` drives it (vllm/entrypoints/common/offline.py,
    0.32.0): requests added by id, then ``step()`` until none is unfinished, each step returning
    the outputs it produced, the finished ones marked. The stand-in finishes one request a step,
    the last added first (vLLM's order of finishing is not the order of adding)."""

    def __init__(self, answer):
        self.answer, self.queue = answer, []

    def add_request(self, request_id: str, prompt, params, **kwargs) -> str:
        self.queue.append((request_id, prompt, params))
        return f"{request_id}-standin"  # the engine's own id; outputs carry the one passed in

    def has_unfinished_requests(self) -> bool:
        return bool(self.queue)

    def step(self) -> list:
        request_id, prompt, params = self.queue.pop()
        return [Output(self.answer(params), request_id, list(prompt["prompt_token_ids"]), True)]


def sampling_params_class(fields: tuple[str, ...]) -> type:
    """A SamplingParams that, like vLLM's msgspec struct, takes only its own fields as keywords."""

    class SamplingParams:
        __struct_fields__ = fields

        def __init__(self, **kwargs):
            unknown = sorted(set(kwargs) - set(fields))
            if unknown:
                raise TypeError(f"Unexpected keyword argument '{unknown[0]}'")
            self.kwargs = kwargs

    return SamplingParams


class CUDAGraphMode(enum.Enum):
    """The members of vllm/config/compilation.py's CUDAGraphMode that the stand-in uses."""

    NONE = 0
    FULL_AND_PIECEWISE = (2, 1)  # (FULL, PIECEWISE), vLLM v1's default


def capture_sizes(largest: int) -> list[int]:
    """vLLM's default CUDA graph batch sizes up to ``largest``: 1, 2, 4, then steps of 8 below 256
    and of 16 from 256 (``VllmConfig._set_cudagraph_sizes``, vllm/config/vllm.py, both releases)."""
    sizes = [i for i in (1, 2, 4) if i <= largest] + list(range(8, min(largest + 1, 256), 8))
    return sizes + list(range(256, largest + 1, 16))


def vllm_config(kwargs: dict) -> types.SimpleNamespace:
    """What ``llm.llm_engine.vllm_config`` holds for an engine built with ``kwargs`` on an H200:
    the attribute paths of vllm/config/vllm.py's VllmConfig (scheduler_config, compilation_config,
    model_config, cache_config), with vLLM's defaults where ``kwargs`` leaves a setting unset
    (max_num_seqs 1024 and max_num_batched_tokens 16384: ``EngineArgs.get_batch_defaults`` for the
    LLM class on a device of >= 70 GiB; CUDA graphs up to min(2 x max_num_seqs, 512) sequences,
    at most max_num_batched_tokens; gpu_memory_utilization 0.92, vllm/config/cache.py)."""
    seqs = kwargs.get("max_num_seqs", 1024)
    tokens = kwargs.get("max_num_batched_tokens", 16384)
    compilation = kwargs.get("compilation_config") or {}
    eager = kwargs.get("enforce_eager", False)
    sizes = kwargs.get("cudagraph_capture_sizes", compilation.get("cudagraph_capture_sizes"))
    largest = kwargs.get("max_cudagraph_capture_size", compilation.get("max_cudagraph_capture_size"))
    if eager:
        sizes = []
    elif sizes is not None:
        sizes = sorted({s for s in sizes if s <= tokens})
    else:
        largest = min(largest or min(2 * seqs, 512), tokens)
        sizes = sorted(set(capture_sizes(largest)) | ({tokens} if tokens <= largest else set()))
    part = types.SimpleNamespace
    return part(
        scheduler_config=part(
            max_num_seqs=seqs,
            max_num_batched_tokens=tokens,
            enable_chunked_prefill=kwargs.get("enable_chunked_prefill", True),
        ),
        compilation_config=part(
            cudagraph_mode=CUDAGraphMode.NONE if eager else CUDAGraphMode.FULL_AND_PIECEWISE,
            cudagraph_capture_sizes=sizes,
            max_cudagraph_capture_size=sizes[-1] if sizes else 0,
        ),
        model_config=part(enforce_eager=eager, max_model_len=kwargs.get("max_model_len", 32768)),
        cache_config=part(
            gpu_memory_utilization=kwargs.get("gpu_memory_utilization", 0.92),
            enable_prefix_caching=kwargs.get("enable_prefix_caching", True),
            block_size=16,
            num_gpu_blocks=4096,
        ),
    )


def sample(params: dict, i: int, tokenizer: StandInTokenizer) -> Sample:
    """Sample i of a request: what the stand-in model writes with seed params['seed'] + i."""
    seed = params["seed"] + i  # vLLM's child seed
    if params["max_tokens"] >= 600:  # a reference chain
        text = f"Step 1: start {seed % 97}.\n\nStep 2: add 3.\n\nStep 3: done.\nThe final answer is {seed % 7}."
    elif seed % 11 == 0:
        return Sample(i, tokenizer.encode(" and so on" * 40)[: params["max_tokens"]], "length")
    else:
        text = f" so the answer is {seed % 5}."
    return Sample(i, tokenizer.encode(text) + [EOS if seed % 2 else EOT], "stop")


def module(
    calls: dict | None = None,
    fields: tuple[str, ...] = FIELDS_0_32,
    version: str = "0.32.0-standin",
    engine_config: bool = True,
) -> types.ModuleType:
    """A module to put in ``sys.modules["vllm"]``; ``calls["llm"]`` and ``calls["generate"]``
    collect the engine's keyword arguments and each generate call's (prompts, params). Without
    ``engine_config`` the engine has no ``llm_engine.vllm_config`` (a release that lacks it)."""
    with_config = engine_config
    calls = calls if calls is not None else {}
    calls.setdefault("llm", [])
    calls.setdefault("generate", [])
    tokenizer = StandInTokenizer()

    class LLM:
        def __init__(self, **kwargs):
            calls["llm"].append(kwargs)
            # vllm/entrypoints/llm.py: LLM.llm_engine, a vllm.v1.engine.llm_engine.LLMEngine
            # holding vllm_config (both releases).
            self.llm_engine = Engine(
                lambda sp: [sample(sp.kwargs, i, tokenizer) for i in reversed(range(sp.kwargs["n"]))]
            )
            self.request_counter = 0
            if with_config:
                self.llm_engine.vllm_config = vllm_config(kwargs)

        def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
            calls.setdefault("reset_prefix_cache", 0)
            calls["reset_prefix_cache"] += 1
            return True

        def get_tokenizer(self):
            return tokenizer

        def generate(self, prompts, sampling_params=None, use_tqdm=True):
            calls["generate"].append((prompts, sampling_params))
            for prompt, sp in zip(prompts, sampling_params):  # LLM._add_request: ids from a counter
                self.llm_engine.add_request(str(self.request_counter), prompt, sp)
                self.request_counter += 1
            outputs = []
            while self.llm_engine.has_unfinished_requests():  # LLM._run_engine
                outputs += [o for o in self.llm_engine.step() if o.finished]
            return sorted(outputs, key=lambda o: int(o.request_id))

    vllm = types.ModuleType("vllm")
    vllm.__version__ = version
    vllm.LLM, vllm.SamplingParams = LLM, sampling_params_class(fields)
    return vllm
