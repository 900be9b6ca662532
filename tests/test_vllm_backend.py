"""The vLLM backend's contract (DESIGN sections 4 and 8), against a stand-in ``vllm`` module.

vLLM needs CUDA, so a fake module records every call the backend makes: how the engine is built,
how many ``generate`` calls a study makes (one per phase, never one per prefix), what each prompt
and each SamplingParams holds. The stand-in mimics vLLM where the backend relies on it: sample i
of a request seeded s is drawn with s + i (vllm/v1/engine/parallel_sampling.py), samples may come
back in any order (each carries its index), and a sample that stops keeps its stop token.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from cotdyn import protocol as P
from cotdyn.backends import make_backend
from cotdyn.benchmarks import Problem
from cotdyn.cache import GenerationCache, generate
from cotdyn.seeds import sample_seed

BOS, EOS, EOT = 1, 2, 3  # EOT: a second stop id the model's generation_config names (like <|eot_id|>)
EXPLICIT = {"n", "seed", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
            "presence_penalty", "frequency_penalty", "max_tokens", "min_tokens", "stop",
            "stop_token_ids", "ignore_eos", "include_stop_str_in_output", "detokenize",
            "skip_special_tokens", "logprobs", "prompt_logprobs", "bad_words", "logit_bias",
            "allowed_token_ids", "watermarking"}


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
class _Sample:
    index: int
    token_ids: list
    finish_reason: str


@dataclass
class _Output:
    outputs: list


def _fake_vllm(calls: dict) -> types.ModuleType:
    tokenizer = StandInTokenizer()

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            calls["llm"].append(kwargs)

        def get_tokenizer(self):
            return tokenizer

        def generate(self, prompts, sampling_params=None, use_tqdm=True):
            calls["generate"].append((prompts, sampling_params))
            return [_Output([_sample(p["prompt_token_ids"], sp.kwargs, i) for i in reversed(range(sp.kwargs["n"]))])
                    for p, sp in zip(prompts, sampling_params)]

    def _sample(prompt, params, i) -> _Sample:
        seed = params["seed"] + i  # vLLM's child seed
        if params["max_tokens"] >= 600:  # a reference chain: three blank-line units and an answer
            text = f"Step 1: start {seed % 97}.\n\nStep 2: add 3.\n\nStep 3: done.\nThe final answer is {seed % 7}."
        elif seed % 11 == 0:
            return _Sample(i, tokenizer.encode(" and so on" * 40)[: params["max_tokens"]], "length")
        else:
            text = f" so the answer is {seed % 5}."
        return _Sample(i, tokenizer.encode(text) + [EOS if seed % 2 else EOT], "stop")

    module = types.ModuleType("vllm")
    module.__version__ = "0.32.0-standin"
    module.LLM, module.SamplingParams = LLM, SamplingParams
    return module


@pytest.fixture
def fake(monkeypatch):
    calls = {"llm": [], "generate": []}
    monkeypatch.setitem(sys.modules, "vllm", _fake_vllm(calls))
    import cotdyn.backends.vllm as backend_module

    monkeypatch.setattr(backend_module, "_model_eos_ids", lambda model_id, revision: [EOT])
    return calls


@pytest.fixture(scope="module")
def protocol(plan) -> dict:
    from cotdyn.plan import effective_protocol

    return effective_protocol(plan)


PROBLEMS = [Problem(f"p{i:02d}", f"What is {i} plus {i + 1}?", str(2 * i + 1), str(2 * i + 1)) for i in range(12)]
MODEL = {"backend": "vllm", "id": "org/model", "revision": "0123abcd" * 5, "dtype": "bfloat16", "seed": 7,
         "vllm": {"gpu_memory_utilization": 0.9}}


def _run_study(backend, protocol, cache, cell="qwen7b-gsm8k"):
    prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in PROBLEMS]
    references = P.reference_requests(PROBLEMS, prompts, protocol, cell)
    chains, _ = generate(backend, references, cache, chunk_size=0)
    table = P.chains_table(PROBLEMS, prompts, chains, "gsm8k")
    plan = P.prefix_plan(table, protocol, backend.tokenizer.decode)
    requests = P.continuation_requests(table, plan, protocol, cell)
    completions, _ = generate(backend, requests, cache, chunk_size=0)
    return prompts, references, plan, requests, completions


def test_engine_is_built_with_pinned_revision_dtype_prefix_caching_and_vllm_defaults(fake):
    backend = make_backend(MODEL)
    assert fake["llm"] == [{"model": "org/model", "revision": MODEL["revision"],
                            "tokenizer_revision": MODEL["revision"], "dtype": "bfloat16", "seed": 7,
                            "enable_prefix_caching": True, "generation_config": "vllm",
                            "gpu_memory_utilization": 0.9}]
    assert backend.model_revision == MODEL["revision"]
    described = backend.describe()
    assert described["vllm_version"] == "0.32.0-standin"
    assert described["stop_token_ids"] == [EOS, EOT]
    assert len(described["chat_template_sha256"]) == len(described["tokenizer_sha256"]) == 64


def test_a_revision_is_required(fake):
    with pytest.raises(ValueError, match="pinned revision"):
        make_backend({**MODEL, "revision": ""})


def test_one_generate_call_per_phase_with_token_prompts_and_explicit_sampling(fake, protocol, tmp_path):
    backend = make_backend(MODEL)
    prompts, references, plan, requests, completions = _run_study(backend, protocol, GenerationCache(tmp_path))

    # Exactly two engine calls: every reference chain, then every (problem, prefix) continuation.
    assert len(fake["generate"]) == 2
    (ref_prompts, ref_params), (cont_prompts, cont_params) = fake["generate"]
    assert len(ref_prompts) == len(PROBLEMS)
    assert len(cont_prompts) == len(plan) > len(PROBLEMS)  # several prefixes per problem, one call

    for sent, request in zip(ref_prompts + cont_prompts, references + requests):
        assert sent == {"prompt_token_ids": list(request.prompt_ids)}
        ids = sent["prompt_token_ids"]
        assert ids[0] == BOS and ids[1] != BOS and ids.count(BOS) == 1  # one BOS, not two
    for sent, row in zip(cont_prompts, plan.itertuples()):  # prefix = the chat prompt + the chain's own ids
        prompt = prompts[int(row.problem_id[1:])]
        assert sent["prompt_token_ids"][: len(prompt)] == prompt
        assert len(sent["prompt_token_ids"]) == len(prompt) + row.prefix_tokens

    for params, request in zip(ref_params + cont_params, references + requests):
        assert set(params.kwargs) == EXPLICIT
        k = params.kwargs
        assert (k["n"], k["seed"], k["max_tokens"]) == (request.n, request.seed, request.sampling.max_tokens)
        assert (k["temperature"], k["top_p"], k["top_k"], k["repetition_penalty"]) == (0.7, 1.0, 0, 1.0)
        assert (k["min_p"], k["presence_penalty"], k["frequency_penalty"], k["min_tokens"]) == (0.0, 0.0, 0.0, 0)
        assert k["stop_token_ids"] == [EOS, EOT] and k["ignore_eos"] is False and k["stop"] == []
    assert {p.kwargs["n"] for p in cont_params} == {protocol["m"]}
    assert {p.kwargs["max_tokens"] for p in ref_params} == {protocol["reference_max_tokens"]}

    # A second run finds everything in the cache: no engine call at all.
    _run_study(make_backend(MODEL), protocol, GenerationCache(tmp_path))
    assert len(fake["generate"]) == 2


def test_seeds_are_unique_per_request_and_per_sample(fake, protocol, tmp_path):
    backend = make_backend(MODEL)
    _, references, plan, requests, _ = _run_study(backend, protocol, GenerationCache(tmp_path))
    assert len({(r.prompt_ids, r.seed) for r in requests}) == len(requests)
    assert len({r.seed for r in requests}) == len(requests)  # across (problem, prefix)
    per_sample = [sample_seed(r.seed, j) for r in requests for j in range(r.n)]
    assert len(set(per_sample)) == len(per_sample) == len(plan) * protocol["m"]  # (problem, prefix, sample)
    assert not set(per_sample) & {r.seed for r in references}


def test_samples_come_back_in_index_order_with_the_stop_token_stripped(fake, protocol, tmp_path):
    backend = make_backend(MODEL)
    _, _, _, requests, completions = _run_study(backend, protocol, GenerationCache(tmp_path))
    reasons = set()
    for request, samples in zip(requests, completions):
        assert len(samples) == request.n
        for j, c in enumerate(samples):
            seed = request.seed + j
            reasons.add(c.finish_reason)
            if c.finish_reason == "stop":
                assert c.text == f" so the answer is {seed % 5}."  # sample j is the one seeded seed + j
                assert c.token_ids[-1] not in (EOS, EOT)
            else:
                assert len(c.token_ids) == request.sampling.max_tokens
            assert c.text == backend.tokenizer.decode(c.token_ids)
    assert reasons == {"stop", "length"}


def test_effective_sampling_reports_the_fields_built(fake, protocol):
    backend = make_backend(MODEL)
    sampling = P.continuation_sampling(protocol)
    effective = backend.effective_sampling(sampling)
    built = backend.sampling_params(sampling, n=5, seed=11)
    assert set(built) == EXPLICIT
    assert {k: v for k, v in effective.items() if k not in ("n", "seed", "sampler", "generation_config")} == \
        {k: v for k, v in built.items() if k not in ("n", "seed")}
    assert effective["generation_config"] == "vllm"


def test_an_unknown_finish_reason_is_an_error():
    from cotdyn.backends.vllm import completion

    with pytest.raises(RuntimeError, match="finish_reason 'abort'"):
        completion([5, 6], "abort", (EOS,), lambda ids: "")
    assert completion([15, EOS], "stop", (EOS,), StandInTokenizer().decode).token_ids == (15,)
    assert completion([15, EOS], "length", (EOS,), StandInTokenizer().decode).token_ids == (15, EOS)
