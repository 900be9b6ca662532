"""The vLLM backend: the registered panel's path (DESIGN section 8).

One phase is one ``LLM.generate`` call: every request goes in at once, as token ids, with its own
``SamplingParams`` (n = m samples, its own seed), and vLLM's scheduler with prefix caching shares
the KV cache of the common chat prompt and of a chain's earlier prefixes. Never one call per
prefix (the original harness's pattern).

Every sampling field is written out (``sampling_params``), and the engine is built with
``generation_config="vllm"``, so a model's own generation_config (its temperature, top_p, top_k,
repetition penalty) never applies (DESIGN section 4). vLLM gives sample i of a request seeded s
the seed s + i, which is the convention of ``cotdyn.seeds``.

Checked against the pinned release, vLLM 0.32.0 (envs/generate-vllm.yaml; it requires
torch 2.13.0 and transformers < 5.20): ``SamplingParams.top_k`` reads 0 as "consider all tokens"
(-1 is also accepted), which is the protocol's own "0 = off", so top_k is passed unchanged;
``vllm/v1/engine/parallel_sampling.py`` gives child i of a request seeded s the seed s + i.

vLLM is imported lazily: it needs CUDA and is absent from the CPU environments.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from ..prompts import ChatTokenizer
from .base import Completion, Request, Sampling


class VLLMBackend:
    name = "vllm"

    def __init__(self, model_id: str, revision: str, dtype: str = "bfloat16", seed: int = 0,
                 extra: dict | None = None):
        import vllm

        if not revision:
            raise ValueError(f"vllm backend: model '{model_id}' needs a pinned revision")
        self.model_id, self.model_revision, self.dtype, self.seed = model_id, revision, dtype, seed
        self.extra = dict(extra or {})
        self.vllm_version = getattr(vllm, "__version__", "unknown")
        self._vllm = vllm
        self.llm = vllm.LLM(model=model_id, revision=revision, tokenizer_revision=revision, dtype=dtype,
                            seed=seed, enable_prefix_caching=True, generation_config="vllm", **self.extra)
        hf_tokenizer = self.llm.get_tokenizer()
        self.tokenizer = ChatTokenizer(hf_tokenizer)
        self.stop_ids = stop_token_ids(hf_tokenizer, _model_eos_ids(model_id, revision))

    def sampling_params(self, sampling: Sampling, n: int, seed: int) -> dict:
        """Every SamplingParams field that affects what is sampled, explicit."""
        return {
            "n": n, "seed": seed,
            "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k,
            "min_p": 0.0, "repetition_penalty": sampling.repetition_penalty,
            "presence_penalty": 0.0, "frequency_penalty": 0.0,
            "max_tokens": sampling.max_tokens, "min_tokens": 0,
            "stop": [], "stop_token_ids": list(self.stop_ids), "ignore_eos": False,
            "include_stop_str_in_output": False,
            # Text is decode(ids) in every backend, so vLLM's incremental detokenizer is not used.
            "detokenize": False, "skip_special_tokens": True,
            "logprobs": None, "prompt_logprobs": None,
            "bad_words": [], "logit_bias": None, "allowed_token_ids": None,
            "watermarking": False,  # None would mean "the engine's watermark, if one is configured"
        }

    def effective_sampling(self, sampling: Sampling) -> dict:
        """The SamplingParams fields built for ``sampling`` (n and seed vary per request)."""
        fields = self.sampling_params(sampling, n=1, seed=0)
        fields["n"], fields["seed"] = "per request (m)", "per request (cotdyn.seeds; sample j: seed + j)"
        return {"sampler": f"vllm {self.vllm_version}", "generation_config": "vllm", **fields}

    def describe(self) -> dict:
        return {"backend": self.name, "vllm_version": self.vllm_version, "model_id": self.model_id,
                "revision": self.model_revision, "dtype": self.dtype, "device": "cuda",
                "engine_seed": self.seed, "engine_extra": self.extra, "prefix_caching": True,
                "stop_token_ids": list(self.stop_ids),
                "chat_template_sha256": self.tokenizer.template_sha256(),
                "tokenizer_sha256": tokenizer_sha256(self.tokenizer.hf)}

    def generate(self, requests: Sequence[Request], desc: str = "") -> list[list[Completion]]:
        """One ``llm.generate`` call for all of ``requests``; completions in request order."""
        if not requests:
            return []
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        params = [self._vllm.SamplingParams(**self.sampling_params(r.sampling, r.n, r.seed)) for r in requests]
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=True)
        if len(outputs) != len(requests):
            raise RuntimeError(f"vllm returned {len(outputs)} outputs for {len(requests)} requests")
        return [self._completions(out, r) for out, r in zip(outputs, requests)]

    def _completions(self, output, request: Request) -> list[Completion]:
        samples = sorted(output.outputs, key=lambda c: c.index)
        if len(samples) != request.n:
            raise RuntimeError(f"vllm returned {len(samples)} samples for a request with n={request.n}")
        return [completion(list(s.token_ids), s.finish_reason, self.stop_ids, self.tokenizer.decode)
                for s in samples]


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


def tokenizer_sha256(hf_tokenizer) -> str:
    vocab = sorted(hf_tokenizer.get_vocab().items())
    return hashlib.sha256(repr(vocab).encode()).hexdigest()
