"""The timing ledger and the start-of-run time estimate (cotdyn.timings)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cotdyn import timings
from cotdyn.benchmarks import load_benchmark, problems_table
from cotdyn.plan import effective_protocol
from cotdyn.study import run_continuations, run_reference

HOST = {"hostname": "box", "cpus": 2, "usable_cpus": 2, "gpus": []}
MODEL = {
    "backend": "transformers",
    "id": "org/model",
    "revision": "abc123",
    "device": "cpu",
    "dtype": "float32",
    "batch_size": 64,
}
PROTOCOL = {
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
    """An observation as ``cotdyn.study`` records it; ``work`` overrides the counts and seconds."""
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
        entry(host=dict(HOST, hostname="other")),
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
    found, warnings = timings.read_observations(tmp_path)
    assert found == [json.loads(good.read_text())]
    assert len(warnings) == 5
    for name in ("torn.json", "list.json", "nosecs.json", "negative.json", "binary.json"):
        (line,) = [w for w in warnings if f"{folder / name} " in w]
        assert "\n" not in line
    assert "field 'seconds'" in next(w for w in warnings if "nosecs.json" in w)


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
        run_reference(problems, model, protocol, "sim-gsm8k", "gsm8k", cache, out / "chains.parquet", out / "ref.json")
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
