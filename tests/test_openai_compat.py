"""The openai_compat backend (cotdyn.generation.backends.openai_compat) against a fake server on
127.0.0.1 (tests/fake_openai_server.py) that speaks vLLM's and llama.cpp's fields."""

from __future__ import annotations

import dataclasses

import pytest
from factories import without_assumed_effects
from fake_openai_server import SERVED, FakeServer

from cotdyn.generation.backends import Request, Sampling, make_backend, registry
from cotdyn.generation.backends.openai_compat import OpenAICompatBackend, ServerError
from cotdyn.generation.cache import GenerationCache, generate

BUDGET = 100  # tokens: more than any chain the fake server writes
SAMPLING = Sampling(temperature=0.7, max_tokens=BUDGET, top_p=0.95, top_k=20, repetition_penalty=1.1)
# every field a vLLM server would otherwise fill from its own or the model's defaults
VLLM_FIELDS = {
    "temperature": 0.7,
    "max_tokens": BUDGET,
    "top_p": 0.95,
    "top_k": 20,
    "repetition_penalty": 1.1,
    "n": 1,
    "min_p": 0.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "min_tokens": 0,
    "stop": [],
    "ignore_eos": False,
}


def entry(server: FakeServer, tokenizer_dir, dialect="vllm", revision="rev-1", **options) -> dict:
    block = {"base_url": server.url, "model": SERVED, "server": dialect, "backoff_s": 0.0, **options}
    return {"backend": "openai_compat", "id": str(tokenizer_dir), "revision": revision, "openai_compat": block}


def backend_for(server, tokenizer_dir, waits: list, **kw) -> OpenAICompatBackend:
    model = entry(server, tokenizer_dir, **kw)
    options = registry.options(model)
    return OpenAICompatBackend(model["id"], model["revision"], options, sleep=waits.append)


def prompt(backend, question="What is 2 plus 3?") -> tuple[int, ...]:
    return tuple(backend.tokenizer.chat_prompt_ids("Think step by step.", question))


@pytest.fixture
def server(smol_tokenizer_dir):
    with FakeServer(smol_tokenizer_dir) as running:
        yield running


@pytest.mark.parametrize("dialect, path", [("vllm", "/v1/completions"), ("llama.cpp", "/completion")])
def test_prompts_go_as_token_ids_and_the_generated_ids_are_read_back(server, smol_tokenizer_dir, dialect, path):
    backend = make_backend(entry(server, smol_tokenizer_dir, dialect))
    ids = prompt(backend)
    [[sample]] = backend.generate([Request(ids, 1, SAMPLING, seed=5)])
    [(sent_to, body)] = server.bodies
    assert sent_to == path and body["prompt"] == list(ids) and body["model"] == SERVED
    expected, stopped = server.generated_ids(ids, 5, BUDGET)
    assert stopped and expected[-1] == server.tokenizer.eos_token_id
    assert sample.token_ids == tuple(expected[:-1])  # read back, the stop token stripped
    assert sample.finish_reason == "stop" and sample.text == backend.tokenizer.decode(sample.token_ids)


@pytest.mark.parametrize("dialect", ["vllm", "llama.cpp"])
def test_a_sample_cut_at_its_budget_ends_by_length(server, smol_tokenizer_dir, dialect):
    backend = make_backend(entry(server, smol_tokenizer_dir, dialect))
    ids = prompt(backend)
    [[sample]] = backend.generate([Request(ids, 1, Sampling(temperature=0.7, max_tokens=3), seed=1)])
    assert sample.finish_reason == "length" and sample.token_ids == tuple(server.generated_ids(ids, 1, 3)[0])


@pytest.mark.parametrize("dialect, field", [("vllm", "token_ids"), ("llama.cpp", "tokens")])
def test_a_server_that_returns_no_ids_is_refused_by_name(smol_tokenizer_dir, dialect, field):
    with FakeServer(smol_tokenizer_dir, omit_ids=True) as server:
        backend = make_backend(entry(server, smol_tokenizer_dir, dialect))
        with pytest.raises(ServerError, match=f"no generated token ids \\('{field}'\\).*never re-tokenized"):
            backend.generate([Request(prompt(backend), 1, SAMPLING, seed=0)])


def test_one_seeded_request_per_sample_in_request_order(server, smol_tokenizer_dir):
    backend = make_backend(entry(server, smol_tokenizer_dir, concurrency=3))
    first, second = prompt(backend, "What is 1 plus 1?"), prompt(backend, "What is 4 plus 4?")
    out = backend.generate([Request(first, 3, SAMPLING, seed=10), Request(second, 2, SAMPLING, seed=20)])
    sent = sorted((tuple(b["prompt"]), b["seed"], b["n"]) for _, b in server.bodies)
    assert sent == sorted([(first, s, 1) for s in (10, 11, 12)] + [(second, s, 1) for s in (20, 21)])
    for samples, (ids, seed) in zip(out, [(first, 10), (second, 20)]):
        assert [c.token_ids for c in samples] == [
            tuple(server.generated_ids(ids, seed + j, BUDGET)[0][:-1]) for j in range(len(samples))
        ]


@pytest.mark.parametrize("dialect", ["vllm", "llama.cpp"])
def test_every_sampling_field_is_explicit(server, smol_tokenizer_dir, dialect):
    backend = make_backend(entry(server, smol_tokenizer_dir, dialect))
    backend.generate([Request(prompt(backend), 1, SAMPLING, seed=3)])
    [(_, body)] = server.bodies
    if dialect == "vllm":
        assert {k: body[k] for k in VLLM_FIELDS} == VLLM_FIELDS
        assert body["stop_token_ids"] == sorted(backend.stop_ids) and body["return_token_ids"] is True
    else:
        renamed = {"n_predict": BUDGET, "repeat_penalty": 1.1, "temperature": 0.7, "top_p": 0.95, "top_k": 20}
        assert {k: body[k] for k in renamed} == renamed
        off = {"min_p": 0.0, "typical_p": 1.0, "mirostat": 0, "dry_multiplier": 0.0, "xtc_probability": 0.0}
        assert {k: body[k] for k in off} == off and body["return_tokens"] is True
    described = backend.effective_sampling(SAMPLING)
    assert all(described[k] == v for k, v in body.items() if k not in ("model", "prompt", "seed", "n"))
    assert described["n"] == "1 per request: one request per sample"


def test_a_field_the_server_refuses_is_an_error_with_its_message(smol_tokenizer_dir):
    with FakeServer(smol_tokenizer_dir, rejects={"min_p"}) as server:
        backend = make_backend(entry(server, smol_tokenizer_dir))
        with pytest.raises(ServerError, match="HTTP 400: .*unsupported field: min_p"):
            backend.generate([Request(prompt(backend), 1, SAMPLING, seed=0)])
        assert len(server.bodies) == 1  # a refusal is not retried


def test_a_field_the_dialect_cannot_express_fails_before_any_request(server, smol_tokenizer_dir, monkeypatch):
    from cotdyn.generation.backends import openai_compat

    backend = make_backend(entry(server, smol_tokenizer_dir))
    vllm = openai_compat.DIALECTS["vllm"]
    names = {k: v for k, v in vllm.names.items() if k != "top_k"}  # a server without top_k
    monkeypatch.setitem(openai_compat.DIALECTS, "vllm", dataclasses.replace(vllm, names=names))
    with pytest.raises(ServerError, match="has no field for top_k = 20"):
        backend.generate([Request(prompt(backend), 1, SAMPLING, seed=0)])
    assert server.bodies == []
    [[_]] = backend.generate([Request(prompt(backend), 1, Sampling(0.7, BUDGET, top_k=0), seed=0)])  # at its off value


def test_the_revision_is_declared_and_part_of_every_cache_key(server, smol_tokenizer_dir, tmp_path):
    unpinned = entry(server, smol_tokenizer_dir, revision=None)
    with pytest.raises(ValueError, match="needs a pinned 'revision'"):
        registry.check_entry(unpinned, "model 'served'")
    first = make_backend(entry(server, smol_tokenizer_dir, revision="rev-1"))
    assert "rev-1" in first.model_revision and first.describe()["revision"] == first.model_revision
    requests = [Request(prompt(first), 2, SAMPLING, seed=7)]
    cache = GenerationCache(tmp_path)
    done, _ = generate(first, requests, cache, chunk_size=0)
    generate(first, requests, cache, chunk_size=0)
    assert len(server.bodies) == 2  # the second run is served from the cache
    second = make_backend(entry(server, smol_tokenizer_dir, revision="rev-2"))
    again, _ = generate(second, requests, cache, chunk_size=0)
    assert len(server.bodies) == 4  # another revision: other keys, asked again
    assert again == done  # (the fake serves the same weights under both names)
    assert requests[0].key(first.model_revision) != requests[0].key(second.model_revision)


def test_a_failing_server_is_retried_with_backoff(smol_tokenizer_dir):
    waits: list[float] = []
    with FakeServer(smol_tokenizer_dir, fail_first=2) as server:
        backend = backend_for(server, smol_tokenizer_dir, waits, backoff_s=0.5)
        ids = prompt(backend)
        [[sample]] = backend.generate([Request(ids, 1, SAMPLING, seed=4)])
    assert waits == [0.5, 1.0] and len(server.bodies) == 3
    assert sample.token_ids == tuple(server.generated_ids(ids, 4, BUDGET)[0][:-1])


def test_retries_run_out_with_the_last_failure_named(smol_tokenizer_dir):
    waits: list[float] = []
    with FakeServer(smol_tokenizer_dir, fail_first=10) as server:
        backend = backend_for(server, smol_tokenizer_dir, waits, backoff_s=0.25, retries=2)
        with pytest.raises(ServerError, match="no answer after 3 tries \\(last: HTTP 503"):
            backend.generate([Request(prompt(backend), 1, SAMPLING, seed=4)])
    assert waits == [0.25, 0.5]


def test_a_server_that_does_not_serve_the_model_is_named(server, smol_tokenizer_dir):
    model = entry(server, smol_tokenizer_dir)
    model["openai_compat"]["model"] = "other-model"
    with pytest.raises(ServerError, match=f"serves {SERVED}, not 'other-model'"):
        make_backend(model)


def test_describe_names_the_server_the_served_model_and_the_tokenizer(server, smol_tokenizer_dir):
    described = make_backend(entry(server, smol_tokenizer_dir, "llama.cpp")).describe()
    assert described["backend"] == "openai_compat" and described["server"] == "llama.cpp"
    assert described["served_model"] == SERVED and described["server_lists"] == {"id": SERVED, "object": "model"}
    assert described["declared_revision"] == "rev-1" and len(described["tokenizer_sha256"]) == 64


@pytest.mark.slow
def test_a_study_on_a_served_model_runs_through_the_dag_to_audit_pass(smol_tokenizer_dir, tmp_path):
    """docs/your-study.md's four steps with `cotdyn init --backend openai_compat`, against the fake server;
    every rule run in this process (tests/inprocess.py; test_your_study runs the steps with Snakemake's own)."""
    import subprocess
    import sys

    import yaml
    from conftest import ROOT
    from inprocess import run_study
    from test_your_study import additions

    def cotdyn(*words):
        done = subprocess.run(
            [sys.executable, "-m", "cotdyn.cli.main", *words], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    (tmp_path / "preregistration").symlink_to(ROOT / "preregistration")
    (tmp_path / "studies" / "served").mkdir(parents=True)
    (tmp_path / "studies" / "served" / "problems.jsonl").write_text(additions(12))
    with FakeServer(smol_tokenizer_dir) as server:
        cotdyn("init", "studies/served", "--jsonl", "studies/served/problems.jsonl", "--answer", "number", "--id", "id",
               "--backend", "openai_compat", "--model-id", str(smol_tokenizer_dir), "--revision", "rev-1",
               "--model", "served", "--option", f"base_url={server.url}", "--option", f"model={SERVED}",
               "--dtype", "bfloat16", "--power-reps", "0")  # fmt: skip
        config = yaml.safe_load((tmp_path / "studies/served/config.yaml").read_text())
        assert config["models"]["served"] == {
            "backend": "openai_compat",
            "id": str(smol_tokenizer_dir),
            "revision": "rev-1",
            "openai_compat": {"base_url": server.url, "model": SERVED},
        }
        plan = tmp_path / "studies" / "served" / "plan.yaml"  # its power table is tests/test_power.py's
        plan.write_text(without_assumed_effects(plan.read_text()))
        cotdyn(
            "register",
            "--plan",
            "studies/served/plan.yaml",
            "--registered",
            "studies/served/REGISTERED",
            "--date",
            "2026-12-01",
        )
        ran = run_study(tmp_path / "studies/served/config.yaml", tmp_path)
        assert {"reference", "continuations", "hypotheses", "manifest"} <= set(ran), sorted(ran)
        asked = len(server.bodies)
    assert asked > 12 and all(path == "/v1/completions" for path, _ in server.bodies)
    audit = cotdyn("audit", "results/served")
    verdict = next(line for line in audit.splitlines() if line.startswith("audit of "))  # after the registration
    assert "PASS" in verdict, audit[-3000:]
    generation = tmp_path / "results/served/cells/served-problems/registered"
    assert (generation / "records.parquet").exists()


def test_served_seed_reduces_into_the_seeds_a_sampler_honours():
    from cotdyn.protocol.seeds import MAX_SAMPLES, request_seed, served_seed

    base = request_seed(2026, "served-gsm8k", "p1", 17, "continuation", "lock")
    assert served_seed(base + 3, None) == base + 3  # every other backend: the seed as drawn
    honoured = 2**32 - 1
    sent = [served_seed(base + j, honoured) for j in range(MAX_SAMPLES)]
    assert all(0 <= s < honoured for s in sent) and len(set(sent)) == MAX_SAMPLES  # a request's samples differ
    assert served_seed(base, honoured) == sum((base >> k) & 0xFFFFFFFF for k in (0, 32)) % honoured  # both halves
    with pytest.raises(ValueError, match="cannot tell a request's 256 samples apart"):
        served_seed(base, MAX_SAMPLES)


def test_llama_cpp_is_sent_and_recorded_the_seed_it_uses(smol_tokenizer_dir):
    """llama-server keeps a seed's low 32 bits (its uint32_t), and 2**32 - 1 means "random": each
    sample's 62-bit seed goes reduced mod 2**32 - 1, the server's echo of the seed it used is that
    seed, and the samples table records it."""
    import pandas as pd

    from cotdyn.generation.requests import samples_table
    from cotdyn.protocol.seeds import served_seed

    with FakeServer(smol_tokenizer_dir, seed_bits=32) as server:  # echoes only the low 32 bits, as llama-server
        backend = make_backend(entry(server, smol_tokenizer_dir, "llama.cpp"))
        assert (
            backend.seeds_honoured
            == 2**32 - 1
            == registry.seeds_honoured(entry(server, smol_tokenizer_dir, "llama.cpp"))
        )
        seed = 2580426328877087488  # the issue's: llama-server used 231258880 of it
        request = Request(prompt(backend), 3, SAMPLING, seed=seed)
        [samples] = backend.generate([request])
    sent = [body["seed"] for _, body in server.bodies]
    assert sorted(sent) == [served_seed(seed + j, 2**32 - 1) for j in range(3)] and max(sent) < 2**32 - 1
    plan = pd.DataFrame([{"problem_id": "p", "prefix": "", "prefix_tokens": 0, "raw_units": 0}])
    table = samples_table(plan, [request], [samples], "gsm8k", None, backend.seeds_honoured)
    assert sorted(table["seed"]) == sorted(sent)
    for j, sample in enumerate(samples):  # each sample is the one the server drew with its recorded seed
        assert sample.token_ids == tuple(
            server.generated_ids(request.prompt_ids, int(table["seed"][j]), BUDGET)[0][:-1]
        )


def test_a_server_that_samples_with_another_seed_than_sent_is_refused(smol_tokenizer_dir):
    with FakeServer(smol_tokenizer_dir, seed_bits=16) as server:  # a server keeping fewer bits than declared
        backend = make_backend(entry(server, smol_tokenizer_dir, "llama.cpp"))
        with pytest.raises(ServerError, match=r"the server sampled with seed \d+, not the seed sent"):
            backend.generate([Request(prompt(backend), 1, SAMPLING, seed=2580426328877087488)])


def test_vllm_seeds_go_as_drawn(server, smol_tokenizer_dir):
    backend = make_backend(entry(server, smol_tokenizer_dir))
    assert backend.seeds_honoured is None
    backend.generate([Request(prompt(backend), 2, SAMPLING, seed=2580426328877087488)])
    assert sorted(b["seed"] for _, b in server.bodies) == [2580426328877087488, 2580426328877087489]


def test_llama_cpp_requests_are_prefilled_afresh_and_one_goes_at_a_time(server, smol_tokenizer_dir):
    """The deterministic settings are the defaults: no prompt cache, one request in flight."""
    backend = make_backend(entry(server, smol_tokenizer_dir, "llama.cpp"))
    assert backend.options["concurrency"] == 1
    backend.generate([Request(prompt(backend), 1, SAMPLING, seed=1)])
    [(_, body)] = server.bodies
    assert body["cache_prompt"] is False


def test_describe_records_the_precision_the_server_serves(smol_tokenizer_dir):
    """llama-server lists a GGUF's quantization type (/v1/models meta.ftype): that is the dtype the
    generation log and the cell manifest record; a study registered at another precision is refused
    by name before any request; a server that lists none leaves the study's declared one, saying so."""
    with FakeServer(smol_tokenizer_dir, ftype="Q4_1") as server:
        model = entry(server, smol_tokenizer_dir, "llama.cpp")
        described = make_backend({**model, "dtype": "Q4_1"}).describe()
        with pytest.raises(ServerError, match=rf"serves '{SERVED}' at Q4_1, but the study registered dtype bfloat16"):
            make_backend({**model, "dtype": "bfloat16"})
        assert not server.bodies
    assert described["dtype"] == "Q4_1" and described["dtype_source"] == "server"
    with FakeServer(smol_tokenizer_dir) as server:
        described = make_backend({**entry(server, smol_tokenizer_dir), "dtype": "bfloat16"}).describe()
    assert described["dtype"] == "bfloat16" and "does not say" in described["dtype_source"]


def init_served(tmp_path, server_url: str, tokenizer_dir, *dtype: str) -> dict:
    """`cotdyn init --backend openai_compat` (llama.cpp's fields) into tmp_path/s; the study plan's protocol."""
    import yaml
    from conftest import ROOT
    from test_your_study import additions

    from cotdyn.cli.init import write_skeleton

    tmp_path.mkdir()
    (tmp_path / "problems.jsonl").write_text(additions(3))
    written = write_skeleton(
        tmp_path / "s", str(tmp_path / "problems.jsonl"), "number", {"question": "question", "gold": "gold", "id": "id"},
        backend="openai_compat",
        model_id=str(tokenizer_dir), revision="rev-1", dtype=dtype[0] if dtype else None,
        registered_plan=str(ROOT / "preregistration" / "plan.yaml"),
        options={"base_url": server_url, "model": SERVED, "server": "llama.cpp"},
    )  # fmt: skip
    return yaml.safe_load(written[1].read_text())["protocol"]


def test_init_registers_the_precision_the_server_serves(smol_tokenizer_dir, tmp_path):
    """A served model's dtype is what its server lists, not the registered plan's bfloat16 (issue 50);
    a --dtype that contradicts the server, or none where the server lists none or is not up, is
    refused by name."""
    from cotdyn.cli.init_checks import InitError

    with FakeServer(smol_tokenizer_dir, ftype="Q4_1") as server:
        assert init_served(tmp_path / "a", server.url, smol_tokenizer_dir)["dtype"] == "Q4_1"
        with pytest.raises(InitError, match=rf"--dtype bfloat16: {server.url} has the model at Q4_1"):
            init_served(tmp_path / "b", server.url, smol_tokenizer_dir, "bfloat16")
    with FakeServer(smol_tokenizer_dir) as server:  # as vLLM: it lists no precision
        with pytest.raises(InitError, match=rf"{server.url} does not say the precision of its weights: give it with"):
            init_served(tmp_path / "c", server.url, smol_tokenizer_dir)
        assert init_served(tmp_path / "d", server.url, smol_tokenizer_dir, "float16")["dtype"] == "float16"
    gone = server.url  # shut down: nothing answers there now
    with pytest.raises(InitError, match=rf"cannot ask {gone} for the precision of its weights \(ServerError: .*start"):
        init_served(tmp_path / "e", gone, smol_tokenizer_dir)
