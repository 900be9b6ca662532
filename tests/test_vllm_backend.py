"""The vLLM backend's contract (docs/reference.md sections 4 and 8), against a stand-in ``vllm`` module.

vLLM needs CUDA, so ``scripts/vllm_standin.py`` records every call the backend makes: how the
engine is built, how many ``generate`` calls a study makes (one per phase, never one per prefix),
what each prompt and each SamplingParams holds. It mimics vLLM where the backend relies on it
(child seeds s + i, samples in any order, stop tokens kept, a SamplingParams that refuses fields
it does not have); see its docstring.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
from conftest import ROOT

from cotdyn.dataset.benchmarks import Problem, problems_table
from cotdyn.generation import requests as P
from cotdyn.generation.backends import Sampling, make_backend
from cotdyn.generation.cache import GenerationCache, generate
from cotdyn.protocol.seeds import sample_seed

sys.path.insert(0, str(ROOT / "scripts"))  # the stand-in lives beside the GPU checks that dry-run with it
import vllm_standin  # noqa: E402
from vllm_standin import BOS, EOS, EOT, StandInTokenizer  # noqa: E402

EXPLICIT = {
    "n",
    "seed",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "max_tokens",
    "min_tokens",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "include_stop_str_in_output",
    "detokenize",
    "skip_special_tokens",
    "logprobs",
    "prompt_logprobs",
    "bad_words",
    "logit_bias",
    "allowed_token_ids",
    "watermarking",
}


def _install(monkeypatch, **standin) -> dict:
    calls = {}
    monkeypatch.setitem(sys.modules, "vllm", vllm_standin.module(calls, **standin))
    import cotdyn.generation.backends.vllm as backend_module

    monkeypatch.setattr(backend_module, "_model_eos_ids", lambda model_id, revision: [EOT])
    return calls


@pytest.fixture
def fake(monkeypatch):
    return _install(monkeypatch)


@pytest.fixture(scope="module")
def protocol(plan) -> dict:
    from cotdyn.plan.load import effective_protocol

    return effective_protocol(plan)


PROBLEMS = [Problem(f"p{i:02d}", f"What is {i} plus {i + 1}?", str(2 * i + 1), str(2 * i + 1)) for i in range(12)]
MODEL = {
    "backend": "vllm",
    "id": "org/model",
    "revision": "0123abcd" * 5,
    "dtype": "bfloat16",
    "seed": 7,
    "vllm": {"gpu_memory_utilization": 0.9},
}


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
    assert fake["llm"] == [
        {
            "model": "org/model",
            "revision": MODEL["revision"],
            "tokenizer_revision": MODEL["revision"],
            "dtype": "bfloat16",
            "seed": 7,
            "enable_prefix_caching": True,
            "generation_config": "vllm",
            "gpu_memory_utilization": 0.9,
        }
    ]
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
    assert {
        k: v for k, v in effective.items() if k not in ("n", "seed", "sampler", "generation_config", "omitted_fields")
    } == {k: v for k, v in built.items() if k not in ("n", "seed")}
    assert effective["generation_config"] == "vllm" and effective["omitted_fields"] == []


def _reference_chains(model: dict, protocol: dict, tmp_path) -> None:
    """The reference phase as rule reference runs it, on PROBLEMS, into tmp_path."""
    from cotdyn.files.writers import write_parquet
    from cotdyn.generation.run import run_reference

    write_parquet(problems_table(PROBLEMS), tmp_path / "problems.parquet")
    run_reference(
        tmp_path / "problems.parquet",
        model,
        protocol,
        "qwen7b-gsm8k",
        "gsm8k",
        tmp_path / "cache",
        tmp_path / "chains.parquet",
        tmp_path / "generation.json",
    )


def test_a_vllm_without_watermarking_runs_and_the_omission_reaches_generation_json_and_the_manifest(
    monkeypatch, protocol, plan, tmp_path
):
    from cotdyn.plan.config import resolve_cells
    from cotdyn.provenance.manifests import cell_manifest

    calls = _install(monkeypatch, fields=vllm_standin.FIELDS_0_26, version="0.26.0")
    _reference_chains(MODEL, protocol, tmp_path)

    ((_, params),) = calls["generate"]  # the stand-in refuses a field 0.26.0 lacks, as vLLM does
    assert all(set(p.kwargs) == EXPLICIT - {"watermarking"} for p in params)
    generation = json.loads((tmp_path / "generation.json").read_text())
    assert generation["effective_sampling"]["omitted_fields"] == ["watermarking"]
    assert generation["backend"]["vllm_version"] == "0.26.0"
    config = {"cells": ["qwen7b-gsm8k"], "models": {"qwen7b": MODEL}, "benchmarks": {"gsm8k": {"kind": "gsm8k"}}}
    cell = resolve_cells(config, plan)["qwen7b-gsm8k"]
    manifest = cell_manifest(cell, {"registered": protocol}, {"reference/r": generation}, "", "", "", {}, {}, {}, {})
    assert manifest["effective_sampling"]["reference/r"]["omitted_fields"] == ["watermarking"]


@pytest.mark.parametrize(
    "missing, sampling, value",
    [
        ("top_k", Sampling(0.7, 150, top_k=40), "40"),
        ("top_p", Sampling(0.7, 150, top_p=0.9), "0.9"),
        ("seed", Sampling(0.7, 150), "11"),
        ("stop_token_ids", Sampling(0.7, 150), r"\[2, 3\]"),
    ],
)
def test_a_missing_field_the_protocol_needs_is_an_error_naming_field_and_version(monkeypatch, missing, sampling, value):
    fields = tuple(f for f in vllm_standin.FIELDS_0_26 if f != missing)
    _install(monkeypatch, fields=fields, version="0.26.0")
    backend = make_backend(MODEL)
    message = rf"vllm 0\.26\.0: SamplingParams has no field '{missing}', which the protocol needs at {value}"
    with pytest.raises(RuntimeError, match=message):
        backend.sampling_params(sampling, n=5, seed=11)
    with pytest.raises(RuntimeError, match=message.replace("11", "0")):
        backend.effective_sampling(sampling)


def test_a_missing_field_at_its_off_value_is_left_out_and_listed(monkeypatch):
    _install(monkeypatch, fields=tuple(f for f in vllm_standin.FIELDS_0_26 if f != "top_k"), version="0.26.0")
    backend = make_backend(MODEL)
    sampling = Sampling(0.7, 150, top_k=0)
    assert set(backend.sampling_params(sampling, n=5, seed=11)) == EXPLICIT - {"top_k", "watermarking"}
    assert backend.effective_sampling(sampling)["omitted_fields"] == ["top_k", "watermarking"]


def test_an_unknown_finish_reason_is_an_error():
    from cotdyn.generation.backends.vllm import completion

    with pytest.raises(RuntimeError, match="finish_reason 'abort'"):
        completion([5, 6], "abort", (EOS,), lambda ids: "")
    assert completion([15, EOS], "stop", (EOS,), StandInTokenizer().decode).token_ids == (15,)
    assert completion([15, EOS], "length", (EOS,), StandInTokenizer().decode).token_ids == (15, EOS)


def test_the_fields_of_the_sampling_params_struct():
    from cotdyn.generation.backends.vllm import sampling_fields

    assert sampling_fields(vllm_standin.sampling_params_class(("n", "seed"))) == {"n", "seed"}


@pytest.mark.slow
def test_the_gpu_check_dry_run_takes_a_cell_through_every_rule_and_reports(tmp_path):
    """scripts/gpu_check_vllm.py --dry-run: the GPU check's own path, on CPU, with a 0.26.0-like stand-in."""
    import subprocess

    from conftest import ROOT

    from cotdyn.files import layout
    from cotdyn.plan.load import load_plan
    from cotdyn.report.secondary_tables import has_secondary

    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu_check_vllm.py"),
            "--dry-run",
            "--out",
            str(tmp_path),
            "--model-dir",
            str(tmp_path / "model"),
            "--problems",
            "3",
            "--baseline-problems",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_check_vllm.json").read_text())

    assert report["model"]["parameters"] == 7_615_616_512  # Qwen2-7B's published count
    assert report["model"]["flops_per_generated_token"] == 2 * report["model"]["matmul_parameters"]
    assert report["model"]["load_format"] == "dummy" and report["peak_tflops"] == 989.0
    for phase in ("reference", "continuations"):
        figures = report["phases"][phase]
        assert figures["generated_tokens"] > 0 and figures["calls"] == 1
        assert figures["utilisation"] == pytest.approx(
            figures["tokens_per_s"] * report["model"]["flops_per_generated_token"] / 1e12 / 989.0
        )
    baseline = report["per_prefix_baseline"]
    assert len(baseline["problems"]) == 2 and baseline["calls"] == baseline["requests"] > 2
    assert baseline["batched_over_per_prefix"] > 0
    assert report["rerun_equal_share"] == report["alone_equal_share"] == 1.0  # the stand-in is deterministic
    pipeline = report["pipeline"]
    assert pipeline["records"] == report["problems"] == 3
    assert pipeline["omitted_fields"] == ["watermarking"]
    # every final output the DAG writes for this study, seed 003's further analyses included when the plan has them
    secondary = has_secondary(load_plan(ROOT / "preregistration" / "plan.yaml"))
    assert secondary  # plan version 2 pre-specifies them
    targets = layout.study_targets([report["cell"]], ["registered"], extras=layout.EXTRAS, secondary=secondary)
    assert set(targets) <= set(pipeline["outputs"])
    assert pipeline["audit"] == {"ok": True, "problems": [], "failures": []}
    manifest = json.loads((tmp_path / "study" / layout.cell_manifest(report["cell"])).read_text())
    assert {s["omitted_fields"][0] for s in manifest["effective_sampling"].values()} == {"watermarking"}


# --- engine settings: the named options of a model entry's vllm: and what the engine made of them ---

H200_DEFAULTS = {  # vLLM's own, for the LLM class on an H200 (see cotdyn.generation.backends.vllm's docstring)
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 16384,
    "enable_chunked_prefill": True,
    "cudagraph_mode": "FULL_AND_PIECEWISE",
    "cudagraph_capture_sizes": [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16)),
    "max_cudagraph_capture_size": 512,
    "enforce_eager": False,
    "max_model_len": 32768,
    "gpu_memory_utilization": 0.9,  # MODEL's
    "enable_prefix_caching": True,
    "block_size": 16,
    "num_gpu_blocks": 4096,
}


def test_describe_records_the_engine_settings_in_effect_read_from_the_engine(fake):
    assert make_backend(MODEL).describe()["engine_settings"] == H200_DEFAULTS
    options = {
        "max_num_seqs": 2048,
        "max_num_batched_tokens": 32768,
        "enable_chunked_prefill": True,
        "max_cudagraph_capture_size": 2048,
        "load_format": "dummy",  # not a named setting: passed through unchecked
    }
    backend = make_backend({**MODEL, "vllm": options})
    backend_set = {k: v for k, v in fake["llm"][0].items() if k not in MODEL["vllm"]}
    assert fake["llm"][-1] == backend_set | options  # every option reaches vllm.LLM as a keyword
    described = backend.describe()
    assert described["engine_extra"] == options
    assert described["engine_settings"] == H200_DEFAULTS | {
        "max_num_seqs": 2048,
        "max_num_batched_tokens": 32768,
        "cudagraph_capture_sizes": [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 2049, 16)),
        "max_cudagraph_capture_size": 2048,
        "gpu_memory_utilization": 0.92,
    }
    json.dumps(described)  # generation.json holds it as it is


def test_explicit_cuda_graph_sizes_and_eager_mode_are_what_the_engine_reports(fake):
    sizes = make_backend({**MODEL, "vllm": {"cudagraph_capture_sizes": [64, 8, 1024]}}).describe()["engine_settings"]
    assert (sizes["cudagraph_capture_sizes"], sizes["max_cudagraph_capture_size"]) == ([8, 64, 1024], 1024)
    eager = make_backend({**MODEL, "vllm": {"enforce_eager": True}}).describe()["engine_settings"]
    assert (eager["cudagraph_mode"], eager["cudagraph_capture_sizes"], eager["enforce_eager"]) == ("NONE", [], True)


def test_settings_a_vllm_does_not_expose_are_recorded_as_such(monkeypatch):
    _install(monkeypatch, engine_config=False, version="0.20.0")
    settings = make_backend(MODEL).describe()["engine_settings"]
    assert settings == {name: "not exposed by vllm 0.20.0" for name in H200_DEFAULTS}

    _install(monkeypatch)
    backend = make_backend(MODEL)
    del backend.llm.llm_engine.vllm_config.compilation_config.cudagraph_mode
    del backend.llm.llm_engine.vllm_config.cache_config
    settings = backend.describe()["engine_settings"]
    absent = {"cudagraph_mode", "gpu_memory_utilization", "enable_prefix_caching", "block_size", "num_gpu_blocks"}
    assert {k for k, v in settings.items() if v == "not exposed by vllm 0.32.0-standin"} == absent
    assert settings["max_num_seqs"] == 1024


@pytest.mark.parametrize(
    "options, message",
    [
        ({"max_num_seqs": 0}, r"vllm\.max_num_seqs must be a positive integer, not 0"),
        ({"max_num_seqs": "512"}, r"vllm\.max_num_seqs must be a positive integer, not '512'"),
        ({"max_num_batched_tokens": True}, r"vllm\.max_num_batched_tokens must be a positive integer, not True"),
        ({"max_num_batched_tokens": 16384.0}, r"vllm\.max_num_batched_tokens must be a positive integer"),
        ({"enable_chunked_prefill": "yes"}, r"vllm\.enable_chunked_prefill must be true or false, not 'yes'"),
        ({"enforce_eager": 1}, r"vllm\.enforce_eager must be true or false, not 1"),
        ({"cudagraph_capture_sizes": []}, r"vllm\.cudagraph_capture_sizes must be a non-empty list"),
        ({"cudagraph_capture_sizes": [8, -1]}, r"vllm\.cudagraph_capture_sizes must be a non-empty list"),
        ({"cudagraph_capture_sizes": 512}, r"vllm\.cudagraph_capture_sizes must be a non-empty list"),
        ({"max_cudagraph_capture_size": 0}, r"vllm\.max_cudagraph_capture_size must be a positive integer"),
        ({"gpu_memory_utilization": 1.5}, r"vllm\.gpu_memory_utilization must be a number in \(0, 1\], not 1\.5"),
        ({"max_model_len": -1}, r"vllm\.max_model_len must be a positive integer, not -1"),
        ({"seed": 3}, r"vllm\.seed is set by the backend"),
        ({"enable_prefix_caching": False}, r"vllm\.enable_prefix_caching is set by the backend"),
        ({"generation_config": "auto"}, r"vllm\.generation_config is set by the backend"),
        (
            {"max_cudagraph_capture_size": 512, "compilation_config": {"max_cudagraph_capture_size": 256}},
            r"vllm\.max_cudagraph_capture_size and vllm\.compilation_config\.max_cudagraph_capture_size are both set",
        ),
    ],
)
def test_a_bad_engine_setting_is_an_error_naming_the_model_and_key_before_an_engine_is_built(fake, options, message):
    with pytest.raises(ValueError, match=r"^model 'org/model': " + message):
        make_backend({**MODEL, "vllm": options})
    assert fake["llm"] == []


def test_vllm_options_must_be_a_mapping(fake):
    with pytest.raises(ValueError, match=r"model 'org/model': 'vllm' must be a mapping"):
        make_backend({**MODEL, "vllm": ["max_num_seqs", 512]})


def test_the_schema_checks_the_named_settings_and_lets_other_arguments_through():
    import copy

    import yaml
    from conftest import ROOT
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    from cotdyn.generation.backends.registry import schema_file

    config = yaml.safe_load((ROOT / "config" / "gpu-dummy.yaml").read_text())

    def with_vllm(**options):
        changed = copy.deepcopy(config)
        changed["models"]["dummy7b"]["vllm"] |= options
        return changed

    with schema_file(ROOT / "src" / "cotdyn" / "plan" / "config.schema.yaml") as schema:
        validate(with_vllm(max_num_seqs=512, cudagraph_capture_sizes=[1, 8, 512], tensor_parallel_size=2), schema)
        for bad in ({"max_num_seqs": 0}, {"max_num_seqs": True}, {"enable_chunked_prefill": "yes"}, {"seed": 1}):
            with pytest.raises(WorkflowError, match=r"Error validating config file"):
                validate(with_vllm(**bad), schema)


def test_engine_settings_reach_generation_json_and_the_cell_manifest(fake, protocol, plan, tmp_path):
    from cotdyn.plan.config import resolve_cells
    from cotdyn.provenance.manifests import cell_manifest

    model = {**MODEL, "vllm": {"max_num_seqs": 512}}
    _reference_chains(model, protocol, tmp_path)
    generation = json.loads((tmp_path / "generation.json").read_text())
    settings = generation["backend"]["engine_settings"]
    assert (settings["max_num_seqs"], settings["max_cudagraph_capture_size"]) == (512, 512)
    config = {"cells": ["qwen7b-gsm8k"], "models": {"qwen7b": model}, "benchmarks": {"gsm8k": {"kind": "gsm8k"}}}
    cell = resolve_cells(config, plan)["qwen7b-gsm8k"]
    manifest = cell_manifest(cell, {"registered": protocol}, {"reference/r": generation}, "", "", "", {}, {}, {}, {})
    assert manifest["backend"]["reference/r"]["engine_settings"] == settings


def test_the_stand_in_captures_cuda_graphs_at_vllms_default_sizes():
    from vllm_standin import capture_sizes, vllm_config

    # vllm/config/vllm.py: [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, largest + 1, 16))
    assert capture_sizes(512) == [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
    assert capture_sizes(6) == [1, 2, 4]
    # a small max_num_seqs caps the graphs at 2 x max_num_seqs; max_num_batched_tokens caps them too,
    # and is captured itself when it falls off the stride
    assert vllm_config({"max_num_seqs": 20}).compilation_config.max_cudagraph_capture_size == 40
    small = vllm_config({"max_num_batched_tokens": 300}).compilation_config
    assert small.cudagraph_capture_sizes[-2:] == [288, 300] and small.max_cudagraph_capture_size == 300


class Killed(Exception):
    pass


def test_each_request_is_told_the_engine_step_it_finishes_and_a_resumed_call_sends_only_the_rest(fake, protocol):
    """Issue 53: the engine's step loop reports each finished request (journaled at once), so a kill
    loses the requests in flight, not the chunk; a resumed call sends the requests not journaled whole."""
    backend = make_backend(MODEL)
    prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in PROBLEMS]
    requests = P.reference_requests(PROBLEMS, prompts, protocol, "qwen7b-gsm8k")
    requests = [dataclasses.replace(r, n=3) for r in requests]
    full = backend.generate(requests, done={}, on_done=lambda rows: None)
    told: list = []

    def journal(rows):
        told.append(rows)
        if len(told) == 5:
            raise Killed  # a kill right after the fifth request's journal write

    with pytest.raises(Killed):
        backend.generate(requests, done={}, on_done=journal)
    # told one request at a time, as the engine finished them (the stand-in: the last added first)
    assert [{i for i, _, _ in rows} for rows in told] == [{i} for i in range(11, 6, -1)]
    assert all(full[i][j] == c for rows in told for i, j, c in rows)
    assert not hasattr(backend.llm.llm_engine, "__dict__") or "step" not in vars(backend.llm.llm_engine)  # unwrapped
    done = {(i, j): c for rows in told for i, j, c in rows}
    again: list = []
    assert make_backend(MODEL).generate(requests, done=done, on_done=again.extend) == full  # a new process's
    sent, _ = fake["generate"][-1]
    assert [s["prompt_token_ids"] for s in sent] == [list(r.prompt_ids) for r in requests[:7]]  # 7 not journaled
    assert sorted((i, j) for i, j, _ in again) == sorted((i, j) for i in range(7) for j in range(3))  # none twice
