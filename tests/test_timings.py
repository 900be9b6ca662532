"""The timing ledger and the start-of-run time estimate (cotdyn.generation.timings)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.generation import timings
from cotdyn.generation.run import run_continuations, run_reference
from cotdyn.plan.config import REFERENCE_FIELDS, STUDY_WIDE
from cotdyn.plan.load import effective_protocol

HOST = {"cpu_model": "AMD EPYC", "cpus": 2, "usable_cpus": 2, "gpus": []}
MODEL = {
    "backend": "transformers",
    "id": "org/model",
    "revision": "abc123",
    "device": "cpu",
    "dtype": "float32",
    "batch_size": 64,
}
PROTOCOL = {
    "system_prompt": "Think step by step.",
    "seed": 1,
    "reference_max_tokens": 600,
    "reference_temperature": 0.7,
    "top_p": 1.0,
    "top_k": 0,
    "repetition_penalty": 1.0,
    "continuation_max_tokens": 150,
    "continuation_temperature": 0.7,
    "m": 5,
    "checkpoints": "steps",
    "checkpoint_stride": 16,
    "segmentation": "step_markers",
    "cap": 8,
    "endpoint": "continuation",
}


def entry(phase="reference", model=MODEL, protocol=PROTOCOL, host=HOST, threads=2, benchmark="arithmetic", **work):
    """An observation as ``cotdyn.generation.run`` records it; ``work`` overrides the counts and seconds."""
    counts = {
        "problems": 6,
        "requests": 6,
        "cached_requests": 0,
        "samples": 6,
        "generated_tokens": 1200,
        "seconds": 30.0,
    }
    return timings.observation(
        phase=phase,
        model=model,
        revision="local-x",
        benchmark=benchmark,
        protocol=protocol,
        host=host,
        threads=threads,
        recorded=work.pop("recorded", "2026-12-01T10:00:00Z"),
        **(counts | work),
    )


def pending(phase="reference", model=MODEL, protocol=PROTOCOL, problems=10, threads=2, benchmark="arithmetic"):
    return timings.Phase(phase, "m-arithmetic", model, benchmark, protocol, problems, threads, "registered")


# --- the arithmetic ------------------------------------------------------------------------------


def test_reference_estimate_is_problems_times_tokens_per_problem_over_the_rate():
    first = entry(problems=6, requests=6, generated_tokens=1200, seconds=30.0)
    # half of this one came from the cache: its 500 tokens are the length of 2 fresh chains
    second = entry(
        problems=4, requests=4, cached_requests=2, generated_tokens=500, seconds=20.0, recorded="2026-12-01T11:00:00Z"
    )
    result = timings.estimate(pending(problems=10), [first, second], HOST)
    rate = (1200 + 500) / (30.0 + 20.0)  # 34 tokens/s
    per_problem = (1200 + 500) / (6 + 2) * (6 + 4) / (6 + 4)  # 212.5 tokens per fresh chain
    assert result.kind == "expected"
    assert math.isclose(result.tokens_per_second, rate)
    assert math.isclose(result.seconds, 10 * per_problem / rate)  # 62.5 s
    assert math.isclose(result.seconds, 62.5)
    assert result.rate_from == 2 and result.latest == "2026-12-01T11:00:00Z"
    assert "about 62 s" in result.text and "2 timings" in result.text and "2026-12-01T11:00:00Z" in result.text


def test_continuation_estimate_scales_by_requests_per_problem():
    observed = entry("continuations", problems=6, requests=54, samples=270, generated_tokens=8100, seconds=60.0)
    result = timings.estimate(pending("continuations", problems=3), [observed], HOST)
    per_problem = 8100 / 54 * 54 / 6  # 1350 tokens: 9 prefixes x 5 samples x 30 tokens
    assert math.isclose(result.seconds, 3 * per_problem / (8100 / 60.0))  # 30 s
    assert result.kind == "expected" and result.text.startswith("about 30 s")


def test_other_budgets_give_the_bound_at_the_observed_rate():
    longer = dict(PROTOCOL, reference_max_tokens=1200)
    result = timings.estimate(pending(protocol=longer, problems=10), [entry()], HOST)
    assert result.kind == "upper bound"
    assert result.bound_tokens == 10 * 1200
    assert math.isclose(result.seconds, 12000 / (1200 / 30.0))  # 300 s
    assert result.text.startswith("at most about 5 min")


def test_other_benchmark_gives_the_bound_not_its_lengths():
    result = timings.estimate(pending(benchmark="gsm8k"), [entry()], HOST)
    assert result.kind == "upper bound" and math.isclose(result.seconds, 10 * 600 / 40.0)


# --- what counts as the same setup -----------------------------------------------------------------


def test_no_observations_gives_the_token_bound_and_says_no_speed_is_known():
    ref = timings.estimate(pending(problems=10), [], HOST)
    assert (ref.kind, ref.seconds, ref.bound_tokens) == ("unknown", None, 6000)
    assert ref.text == f"at most 6,000 tokens; {timings.NO_TIMING}"
    steps = timings.estimate(pending("continuations", problems=10), [], HOST)
    assert steps.bound_tokens == 10 * (8 + 1) * 5 * 150  # at most cap + 1 prefixes per chain
    tokens = dict(PROTOCOL, checkpoints="tokens")
    bound = timings.estimate(pending("continuations", protocol=tokens, problems=10), [], HOST).bound_tokens
    assert bound == 10 * 39 * 5 * 150  # prefixes 0, 16, ..., 592 and 600
    uncapped = timings.estimate(pending("continuations", protocol=dict(PROTOCOL, cap=None)), [], HOST)
    assert uncapped.bound_tokens is None and "unknown until the chains exist" in uncapped.text
    assert timings.NO_TIMING in uncapped.text


def test_token_checkpoint_bound_counts_the_prefixes_of_a_full_length_chain():
    # (budget, stride, prefixes by hand): 0, 16, ..., 592, 600 | 0, 16, 32, 48, 64 | 0, 1 | 0
    for length, stride, prefixes in ((600, 16, 39), (64, 16, 5), (1, 16, 2), (0, 16, 1)):
        protocol = dict(PROTOCOL, checkpoints="tokens", reference_max_tokens=length, checkpoint_stride=stride)
        assert timings.token_bound("continuations", protocol, 2) == 2 * prefixes * 5 * 150


def test_a_different_revision_setting_machine_or_thread_count_is_not_used():
    others = [
        entry(model=dict(MODEL, revision="def456")),
        entry(model=dict(MODEL, batch_size=16)),
        entry(model=dict(MODEL, device="cuda:0")),
        entry(model=dict(MODEL, dtype="bfloat16")),
        entry(host=dict(HOST, cpu_model="Intel Xeon")),
        entry(host=dict(HOST, usable_cpus=1)),
        entry(threads=1),
        entry("continuations"),
    ]
    for other in others:
        assert timings.estimate(pending(), [other], HOST).kind == "unknown", other
    assert timings.estimate(pending(), others + [entry()], HOST).rate_from == 1


def test_spelled_out_defaults_match_implicit_ones():
    implicit = {"backend": "transformers", "id": "org/model", "revision": "abc123"}
    spelled = dict(implicit, device="cpu", dtype="float32", batch_size=16, share_prefill=True, decode="compacting")
    spelled["chunk_size"] = 0
    assert timings.speed_settings(implicit) == timings.speed_settings(spelled)
    assert timings.model_identity(implicit) == "org/model@abc123"


def test_a_gguf_model_is_named_by_its_file_and_package_version():
    model = {"backend": "transformers", "gguf": {"package": "no-such-package-x", "file": "m.gguf"}, "id": "a/b"}
    assert timings.model_identity(model) == "gguf no-such-package-x==not installed/m.gguf"


def test_a_local_directory_is_another_model_once_its_weights_change(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"12")
    model = {"backend": "transformers", "id": str(tmp_path)}
    before = timings.model_identity(model)
    (tmp_path / "model.safetensors").write_bytes(b"1234")
    assert timings.model_identity(model) != before


def test_continuation_forecast_from_the_exact_request_count():
    phase = pending("continuations", problems=None)
    observed = entry("continuations", problems=6, requests=54, samples=270, generated_tokens=8100, seconds=60.0)
    seconds, line = timings.continuation_forecast(phase, 40, 10, [observed], HOST)
    assert math.isclose(seconds, 30 * (8100 / 54) / (8100 / 60.0))  # 30 fresh x 150 tokens / 135 tokens/s
    assert line.startswith("30 of 40 continuation requests to generate (10 in the cache): about 33 s")
    other_budget = entry("continuations", protocol=dict(PROTOCOL, m=10), generated_tokens=8100, seconds=60.0)
    seconds, line = timings.continuation_forecast(phase, 40, 10, [other_budget], HOST)
    assert math.isclose(seconds, 30 * 5 * 150 / 135.0)  # every continuation at its budget
    assert "at most about 3 min (at most 22,500 tokens at 135 tokens/s" in line
    # a reference timing is quoted, never used for continuations
    seconds, line = timings.continuation_forecast(phase, 40, 10, [entry(generated_tokens=1200, seconds=30.0)], HOST)
    assert seconds is None and "at most 22,500 tokens; no timing of continuations" in line
    assert "reference chains ran at 40 tokens/s" in line
    assert timings.continuation_forecast(phase, 40, 40, [observed], HOST) == (
        0.0,
        "0 of 40 continuation requests to generate (40 in the cache): no generation",
    )
    seconds, line = timings.continuation_forecast(phase, 40, 0, [entry(host=dict(HOST, cpus=64))], HOST)
    assert seconds is None and "at most 30,000 tokens; no timing of continuations" in line and "ran at" not in line


# --- what the cache already holds ------------------------------------------------------------------


def _shards(cache: Path, *names: str) -> None:
    folder = cache / "local-x"  # entry()'s revision
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("{}")


def _did(phase="reference", problems=10, **counts):
    """An observation of pending(phase, problems=problems)'s work."""
    done = timings.work(phase, MODEL, "m-arithmetic", "arithmetic", PROTOCOL, problems)
    return entry(phase, work=done, **({"problems": problems, "requests": problems} | counts))


def test_covered_requests_by_hand_and_only_the_rest_is_estimated(tmp_path):
    _shards(tmp_path, "a.json", "b.json", "c.json")
    # two earlier runs of the same 10 requests: 3 fresh in a.json, then 4 more in b.json and c.json
    first = _did(cached_requests=7, generated_tokens=600, seconds=15.0, shards={"a.json": 3})
    second = _did(cached_requests=6, generated_tokens=800, seconds=20.0, shards={"b.json": 2, "c.json": 2})
    assert timings.coverage(pending(), [first, second], tmp_path) == timings.Coverage(10, 7, 2)
    result = timings.estimate(pending(), [first, second], HOST, tmp_path)
    # 40 tokens/s, 200 tokens per chain: 3 of 10 problems' worth of chains
    assert math.isclose(result.seconds, 10 * 0.3 * 200 / 40)  # 15 s
    assert result.kind == "expected" and result.bound_tokens == 0.3 * 10 * 600
    assert result.text.startswith(
        "about 15 s (7 of 10 requests in the cache from 2 earlier runs, so 30.0% of 10 problems x 200 tokens / "
        "40 tokens/s; from 2 timings"
    )
    # without the cache folder, the whole phase: 10 x 200 / 40
    assert math.isclose(timings.estimate(pending(), [first, second], HOST).seconds, 50.0)
    # a shard named by two observations covers its requests once
    again = _did(cached_requests=7, generated_tokens=600, seconds=15.0, shards={"a.json": 3}, recorded="x")
    assert timings.coverage(pending(), [first, second, again], tmp_path) == timings.Coverage(10, 7, 3)


def test_covered_never_exceeds_the_requests_and_a_covered_phase_takes_no_time(tmp_path):
    _shards(tmp_path, "a.json", "b.json")
    first = _did(shards={"a.json": 10})
    # a second cache (say, another machine's) merged in: its 10 fresh requests are the same ones
    second = _did(shards={"b.json": 10}, recorded="2026-12-01T11:00:00Z")
    assert timings.coverage(pending(), [first, second], tmp_path) == timings.Coverage(10, 10, 2)
    for observations in ([first], [first, second]):
        result = timings.estimate(pending(), observations, HOST, tmp_path)
        assert (result.kind, result.seconds, result.bound_tokens) == ("cached", 0.0, 0)
    assert result.text == "in the cache from 2 earlier runs: no generation expected"
    # a machine without timings still knows the cache holds the work
    assert timings.estimate(pending(), [first], dict(HOST, cpu_model="Intel Xeon"), tmp_path).kind == "cached"


def test_a_deleted_shard_uncovers_its_observation(tmp_path):
    _shards(tmp_path, "a.json", "b.json", "c.json")
    first = _did(cached_requests=4, shards={"a.json": 6})
    second = _did(cached_requests=6, shards={"b.json": 2, "c.json": 2})
    (tmp_path / "local-x" / "c.json").unlink()
    assert timings.coverage(pending(), [first, second], tmp_path) == timings.Coverage(10, 6, 1)
    (tmp_path / "local-x" / "a.json").unlink()
    assert timings.coverage(pending(), [first, second], tmp_path) == timings.Coverage(10, 0, 0)
    uncovered = timings.estimate(pending(), [first, second], HOST, tmp_path)
    assert uncovered == timings.estimate(pending(), [first, second], HOST)  # the whole phase again
    # the shard must be in the folder of the observation's own model revision
    (tmp_path / "other-revision").mkdir()
    (tmp_path / "other-revision" / "a.json").write_text("{}")
    assert timings.coverage(pending(), [first], tmp_path).cached == 0


def test_an_observation_without_work_or_shards_covers_nothing(tmp_path):
    _shards(tmp_path, "a.json")
    old = entry(problems=10, requests=10)  # recorded before work and shards were
    assert timings.coverage(pending(), [old], tmp_path) is None
    nothing = _did(shards={})
    assert timings.coverage(pending(), [nothing], tmp_path) == timings.Coverage(10, 0, 0)
    assert timings.coverage(pending(problems=None), [_did(shards={"a.json": 10})], tmp_path) is None


def test_a_different_cell_benchmark_seed_or_system_prompt_is_different_work():
    def done(phase="reference", model=MODEL, cell="m-arithmetic", benchmark="arithmetic", problems=10, **changes):
        return timings.work(phase, model, cell, benchmark, dict(PROTOCOL, **changes), problems)

    same = done()
    assert same == done() and len(same) == 20
    assert same == done(epsilon=0.1, label="chain", dtype="float16")  # read after the requests, or not keyed
    others = [
        done(cell="n-arithmetic"),
        done(benchmark="gsm8k"),
        done(seed=2),
        done(system_prompt="Answer."),
        done(problems=11),
        done(model=dict(MODEL, revision="def456")),
        done(top_p=0.9),
        done("continuations"),
    ]
    assert len({same, *others}) == len(others) + 1
    assert done(problems=None) is None
    cont = done("continuations")
    for change in ({"m": 6}, {"cap": 4}, {"segmentation": "sentences"}, {"continuation_max_tokens": 64}):
        assert done("continuations", **change) != cont, change
    assert done("continuations", endpoint="reasoning") != cont  # the reasoning cut moves the last prefix
    assert done("continuations", endpoint="forced") == cont  # the same prefixes and samples
    # other work in the same cache covers nothing
    elsewhere = entry(work=done(seed=2), problems=10, requests=10, shards={"a.json": 10})
    assert timings.coverage(pending(), [elsewhere], "unused") is None


def test_the_benchmark_entry_and_the_file_it_reads_are_part_of_the_work(tmp_path):
    def done(entry):
        return timings.work("reference", MODEL, "m-arithmetic", "arithmetic", PROTOCOL, 10, entry)

    seven = {"kind": "arithmetic", "n": 10, "seed": 7}
    assert done(seven) == done(dict(seven)) != done({**seven, "seed": 8})  # other problems, same count
    assert done(seven) != done(None)
    questions = tmp_path / "mine.jsonl"
    questions.write_text('{"id": "a", "question": "1+1?", "answer": "2"}\n')
    mine = {"kind": "jsonl", "path": str(questions), "answer_type": "number"}
    first = done(mine)
    questions.write_text('{"id": "a", "question": "1+2?", "answer": "3"}\n')
    assert done(mine) != first  # the same path, edited: other problems
    assert timings.problem_source({**mine, "path": str(tmp_path / "gone.jsonl")})["path_sha256"] == "missing"


def test_every_protocol_parameter_is_placed_for_the_work(plan):
    # a new parameter must be placed: shaping the requests, a model setting, or read after generation
    read_after = {
        "epsilon",
        "null_answers",
        "label",
        "equivalence",
        "endpoint",
        "answer_form",
    }  # endpoint: its cut only
    shaping = set(REFERENCE_FIELDS) | set(timings.CONTINUATION_FIELDS)
    assert set(plan["protocol"]) == shaping | set(STUDY_WIDE) | read_after
    assert not shaping & read_after


def test_the_rate_is_said_to_depend_on_batch_fill_when_timed_on_fewer_problems():
    caveat = "that rate was timed on at most 6 problems, and it depends on how full the batches are"
    assert caveat in timings.estimate(pending(problems=10), [entry()], HOST).text  # 6 rows of a batch of 64
    assert caveat not in timings.estimate(pending(problems=6), [entry()], HOST).text
    full = dict(MODEL, batch_size=4)  # the 6 timed rows already filled batches of 4
    assert caveat not in timings.estimate(pending(model=full), [entry(model=full)], HOST).text
    simulated = {"backend": "simulated"}
    assert caveat not in timings.estimate(pending(model=simulated), [entry(model=simulated)], HOST).text
    vllm = {"backend": "vllm", "id": "org/model", "revision": "abc123"}
    assert caveat in timings.estimate(pending(model=vllm), [entry(model=vllm)], HOST).text


# --- the ledger's files ----------------------------------------------------------------------------


def test_observations_round_trip_and_damaged_files_are_skipped_by_name(tmp_path):
    good = timings.write_observation(entry(), tmp_path)
    folder = tmp_path / timings.OBSERVATIONS
    assert good.parent == folder and not list(folder.glob("*.tmp"))
    (folder / "torn.json").write_text('{"format": "cotdyn-timi')
    (folder / "list.json").write_text("[1, 2]")
    (folder / "nosecs.json").write_text(json.dumps({k: v for k, v in entry().items() if k != "seconds"}))
    (folder / "negative.json").write_text(json.dumps(entry(seconds=-1.0)))
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00")
    (folder / "escape.json").write_text(json.dumps(entry(shards={"../../x.json": 3})))
    found, warnings = timings.read_observations(tmp_path)
    assert found == [json.loads(good.read_text())]
    assert len(warnings) == 6
    for name in ("torn.json", "list.json", "nosecs.json", "negative.json", "binary.json", "escape.json"):
        (line,) = [w for w in warnings if f"{folder / name} " in w]
        assert "\n" not in line
    assert "field 'seconds'" in next(w for w in warnings if "nosecs.json" in w)
    assert "field 'shards'" in next(w for w in warnings if "escape.json" in w)


def test_each_observation_gets_its_own_file_outside_the_cache_shard_folders(tmp_path):
    first = timings.write_observation(entry(), tmp_path)
    second = timings.write_observation(entry(seconds=31.0), tmp_path)
    assert first != second
    assert not list(tmp_path.glob("*/*.json"))  # <cache>/<revision>/*.json are the cache's shards only


def test_a_missing_ledger_is_no_observation(tmp_path):
    assert timings.read_observations(tmp_path / "absent") == ([], [])


# --- never a negative or undefined time --------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 50),
            st.integers(0, 50),
            st.integers(0, 50),
            st.integers(0, 10**6),
            st.floats(0, 1e5, allow_nan=False),
        ),
        max_size=4,
    ),
    st.integers(0, 2000),
)
def test_estimate_is_never_negative_or_nan(work, problems):
    observations = [
        entry(problems=p, requests=r + c, cached_requests=c, generated_tokens=t, seconds=s) for p, r, c, t, s in work
    ]
    for phase in ("reference", "continuations"):
        result = timings.estimate(pending(phase, problems=problems), observations, HOST)
        for value in (result.seconds, result.tokens_per_second):
            assert value is None or (math.isfinite(value) and value >= 0)
        assert "nan" not in result.text and "inf" not in result.text


def test_durations_read_as_a_person_says_them():
    assert timings.duration(0.2) == "under a second"
    assert timings.duration(42.4) == "about 42 s"
    assert timings.duration(150) == "about 2 min"
    assert timings.duration(3 * 3600) == "about 3.0 h"
    assert timings.duration(float("nan")) == "an unknown time"
    assert timings.per_second(1.8918) == "1.89 tokens/s"
    assert timings.per_second(32.78) == "32.8 tokens/s"
    assert timings.per_second(1240.4) == "1,240 tokens/s"


# --- written by the generation phases ----------------------------------------------------------------


def test_generation_phases_record_fresh_work_and_nothing_when_all_is_cached(tmp_path, plan, data_dir, capsys):
    problems = tmp_path / "problems.parquet"
    table = problems_table(load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 4}))
    table.to_parquet(problems, index=False)
    protocol = effective_protocol(plan)
    model = {"backend": "simulated"}
    cache = tmp_path / "cache"

    def run(out: Path):
        observer = timings.TimingObserver()
        run_reference(
            problems,
            model,
            protocol,
            "sim-gsm8k",
            "gsm8k",
            cache,
            out / "chains.parquet",
            out / "ref.json",
            observer=observer,
        )
        run_continuations(
            problems,
            out / "chains.parquet",
            model,
            protocol,
            "sim-gsm8k",
            "gsm8k",
            cache,
            out / "s.parquet",
            out / "c.json",
            observer=observer,
        )

    run(tmp_path / "first")
    found, warnings = timings.read_observations(cache)
    requests = next(e["requests"] for e in found if e["phase"] == "continuations")
    # the continuations job announces its work from the reference phase timed just before it
    assert f"sim-gsm8k continuations: {requests} of {requests} continuation requests" in capsys.readouterr().out
    assert warnings == [] and sorted(e["phase"] for e in found) == ["continuations", "reference"]
    for observed in found:
        log = json.loads(
            (tmp_path / "first" / ("ref.json" if observed["phase"] == "reference" else "c.json")).read_text()
        )
        assert observed["generated_tokens"] == log["generated_tokens"] > 0
        assert observed["fresh_requests"] == log["requests"] - log["cached_requests"]
        assert observed["problems"] == 4 and observed["benchmark"] == "gsm8k"
        assert observed["machine"] == timings.machine()
        assert observed["settings"] == timings.speed_settings(model)
        assert observed["budgets"] == timings.budgets(protocol, observed["phase"])
    run(tmp_path / "again")  # every request now comes from the cache
    assert f"0 of {requests} continuation requests to generate ({requests} in the cache)" in capsys.readouterr().out
    assert len(timings.read_observations(cache)[0]) == 2
    phase = timings.Phase("reference", "sim-gsm8k", model, "gsm8k", protocol, 4)
    assert timings.estimate(phase, found, timings.machine()).kind == "expected"


def test_a_second_run_into_the_same_cache_is_estimated_as_cached(tmp_path, plan, data_dir):
    problems = tmp_path / "problems.parquet"
    table = problems_table(load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 4}))
    table.to_parquet(problems, index=False)
    protocol, model, cache = effective_protocol(plan), {"backend": "simulated"}, tmp_path / "cache"

    def run(out: Path):
        observer = timings.TimingObserver()
        run_reference(
            problems,
            model,
            protocol,
            "sim-gsm8k",
            "gsm8k",
            cache,
            out / "chains.parquet",
            out / "r.json",
            observer=observer,
        )
        chains = out / "chains.parquet"
        run_continuations(
            problems,
            chains,
            model,
            protocol,
            "sim-gsm8k",
            "gsm8k",
            cache,
            out / "s.parquet",
            out / "c.json",
            observer=observer,
        )

    def estimates():
        # what the start of a run knows: the cell, its benchmark, the problem count and the protocol
        observations, _ = timings.read_observations(cache)
        return {
            phase: timings.estimate(
                timings.Phase(phase, "sim-gsm8k", model, "gsm8k", protocol, 4), observations, timings.machine(), cache
            )
            for phase in timings.PHASES
        }

    run(tmp_path / "first")
    # the jobs name their benchmark entry; the start of a run names the same one
    entry = {"kind": "gsm8k", "limit": 4}
    run_reference(
        problems, model, protocol, "sim-gsm8k", "gsm8k", tmp_path / "c2", tmp_path / "c.parquet", tmp_path / "g.json",
        observer=timings.TimingObserver(benchmark_entry=entry),
    )  # fmt: skip
    ledger, _ = timings.read_observations(tmp_path / "c2")
    named = timings.Phase("reference", "sim-gsm8k", model, "gsm8k", protocol, 4, benchmark_entry=entry)
    assert timings.estimate(named, ledger, timings.machine(), tmp_path / "c2").kind == "cached"
    other_limit = timings.Phase("reference", "sim-gsm8k", model, "gsm8k", protocol, 4, benchmark_entry={"kind": "x"})
    assert timings.estimate(other_limit, ledger, timings.machine(), tmp_path / "c2").kind != "cached"
    before = estimates()
    assert {p: e.kind for p, e in before.items()} == {"reference": "cached", "continuations": "cached"}
    assert before["reference"].text == "in the cache from 1 earlier run: no generation expected"
    run(tmp_path / "second")
    for log in ("r.json", "c.json"):  # the estimate was right: the second run generated nothing
        written = json.loads((tmp_path / "second" / log).read_text())
        assert written["cached_requests"] == written["requests"] and written["generated_tokens"] == 0
    # another cell name draws other seeds: other work, nothing covered
    observations, _ = timings.read_observations(cache)
    other = timings.Phase("reference", "sim2-gsm8k", model, "gsm8k", protocol, 4)
    assert timings.estimate(other, observations, timings.machine(), cache).kind != "cached"
    # the continuations' shards deleted: they are estimated again, the chains still cached
    (continued,) = [e for e in observations if e["phase"] == "continuations"]
    assert sum(continued["shards"].values()) == continued["fresh_requests"] > 0
    for name in continued["shards"]:
        (cache / continued["revision"].replace("/", "_") / name).unlink()
    after = estimates()
    assert after["reference"].kind == "cached" and after["continuations"].kind == "expected"


def test_the_machine_is_its_hardware_not_its_name(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: avx2\n")
    assert timings._cpu_model(cpuinfo) == "AMD EPYC 9654 96-Core Processor"
    assert timings._cpu_model(tmp_path / "absent")  # some other name, never an error
    assert set(timings.machine()) == {"cpu_model", "cpus", "usable_cpus", "gpus"}


# --- the first chunk's forecast, where the ledger has no timing -----------------------------------


def test_the_rest_of_a_phase_is_forecast_at_its_first_chunks_rate_by_hand():
    # 40 of 400 pending rows in 12 s: 0.3 s a row, so 108 s for the other 360
    seconds, text = timings.first_chunk_text(12.0, 40, 400)
    assert seconds == pytest.approx(108.0)
    assert "its first 40 of 400 pending rows took 12 s, so about 2 min for the other 360 at that rate" in text
    assert timings.first_chunk_text(3.0, 0, 10)[1].endswith("so an unknown time for the other 10 at that rate")


class CountingBackend:
    """A backend that counts the rows it is asked for, to show no generation is drawn and thrown away."""

    def __init__(self, backend):
        self.backend, self.rows = backend, 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate(self, requests, desc=""):
        self.rows += sum(r.n for r in requests)
        return self.backend.generate(requests, desc=desc)


def test_the_first_chunk_is_real_work_its_forecast_is_printed_and_no_sample_changes(
    tmp_path, plan, data_dir, tiny_model_dir, capsys
):
    from cotdyn.generation.run import _backend, read_problems

    problems = tmp_path / "problems.parquet"
    table = problems_table(load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 3}))
    table.to_parquet(problems, index=False)
    protocol = effective_protocol(plan, {"reference_max_tokens": 24, "continuation_max_tokens": 6, "m": 2})
    # chunks of 2 requests: the reference phase's 3 chains take two chunks, so a forecast follows the first
    model = {"backend": "transformers", "id": str(tiny_model_dir), "dtype": "float32", "batch_size": 4, "chunk_size": 2}

    def run(out: Path, observer) -> tuple[bytes, bytes, int]:
        backend = CountingBackend(_backend(model, read_problems(problems), "gsm8k"))
        cache = out / "cache"
        run_reference(
            problems, model, protocol, "t-gsm8k", "gsm8k", cache, out / "chains.parquet", out / "r.json",
            backend=backend, observer=observer,
        )  # fmt: skip
        run_continuations(
            problems, out / "chains.parquet", model, protocol, "t-gsm8k", "gsm8k", cache, out / "s.parquet",
            out / "c.json", backend=backend, observer=observer,
        )  # fmt: skip
        logged = sum(json.loads((out / log).read_text())["samples"] for log in ("r.json", "c.json"))
        return (out / "chains.parquet").read_bytes(), (out / "s.parquet").read_bytes(), backend.rows, logged

    timed = run(tmp_path / "timed", timings.TimingObserver())
    assert timed[2] == timed[3] > 3  # every row drawn is a row the phases keep: nothing drawn and thrown away
    printed = capsys.readouterr().out
    assert (
        "t-gsm8k reference chains: no timing of this model on this machine yet; its first 2 of 3 pending rows"
        in printed
    )
    assert "so about" in printed or "so under a second" in printed
    # the continuations are forecast too: the ledger has only a reference timing, whose rate they never borrow
    assert "t-gsm8k continuations: no timing of this model on this machine yet; its first 4 of" in printed
    assert run(tmp_path / "plain", None) == timed  # the observer changes no sample
    # with a timing in the ledger, and everything cached, no forecast
    assert run(tmp_path / "timed", timings.TimingObserver())[2] == 0
    assert "pending rows took" not in capsys.readouterr().out
