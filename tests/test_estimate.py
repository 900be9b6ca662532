"""What a run is about to generate and how long that should take (cotdyn.generation.estimate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.generation import estimate as E
from cotdyn.generation.estimate import problem_count, registered_sizes, run_summary
from cotdyn.generation.run import run_continuations, run_reference
from cotdyn.plan.config import Cell
from cotdyn.plan.load import effective_protocol, load_plan

PLAN = load_plan(Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml")


def test_run_summary_names_study_cells_problems_and_budgets():
    cells = {
        "smollm2-arithmetic": Cell(
            "smollm2-arithmetic",
            "smollm2",
            "arithmetic",
            {"backend": "transformers", "gguf": {"package": "p", "file": "m.gguf"}, "device": "cpu"},
            {"kind": "arithmetic", "n": 6, "seed": 7},
        ),
        "qwen-gsm8k": Cell(
            "qwen-gsm8k", "qwen", "gsm8k", {"backend": "vllm", "id": "Qwen/x", "device": "cuda"}, {"kind": "gsm8k"}
        ),
    }
    protocol = {"reference_max_tokens": 600, "continuation_max_tokens": 150, "m": 5}
    lines = run_summary("default", cells, protocol, "results/cache", registered_sizes(PLAN))
    assert lines[0] == "cotdyn: study 'default', outputs under results/default/, generations cached in results/cache/"
    assert "m.gguf (transformers backend, cpu), 6 arithmetic problems" in lines[1]
    assert "Qwen/x (vllm backend, cuda), 1319 gsm8k problems" in lines[2]
    assert "at most 600 tokens" in lines[3] and "m = 5" in lines[3] and "at most 150 tokens" in lines[3]


def test_problem_count_takes_n_then_limit_then_the_plans_size():
    sizes = registered_sizes(PLAN)
    assert sizes == {"gsm8k": 1319, "math500": 500}
    assert problem_count({"kind": "arithmetic", "n": 6}, sizes) == 6
    assert problem_count({"kind": "math500", "limit": 40}, sizes) == 40
    # a panel benchmark's entry carries the plan's n: the limit still cuts it (issue 28)
    assert problem_count({"kind": "gsm8k", "n": 1319, "limit": 120}, sizes) == 120
    assert problem_count({"kind": "arithmetic", "n": 6, "limit": 40}, sizes) == 6
    assert problem_count({"kind": "math500"}, sizes) == 500
    assert problem_count({"kind": "gsm8k", "path": "x.jsonl"}, sizes) == 1319
    assert problem_count({"kind": "jsonl", "path": "own.jsonl"}, sizes) is None  # no such file


def test_a_jsonl_of_ones_own_is_counted_by_its_lines(tmp_path):
    own = tmp_path / "own.jsonl"
    own.write_text('{"q": 1}\n\n{"q": 2}\n{"q": 3}\n')
    assert problem_count({"kind": "jsonl", "path": str(own)}, {}) == 3
    assert problem_count({"kind": "jsonl", "path": str(own), "limit": 2}, {}) == 2


def _smollm2_cell(device: str = "cpu") -> dict[str, Cell]:
    model = {"backend": "transformers", "gguf": {"package": "p", "file": "m.gguf"}, "device": device}
    return {"s-arithmetic": Cell("s-arithmetic", "s", "arithmetic", model, {"kind": "arithmetic", "n": 6, "seed": 7})}


def _jobs(protocol: dict) -> list:
    return [
        ("continuations", "s-arithmetic", "registered", protocol, 2),
        ("reference", "s-arithmetic", "t0.7", protocol, 2),
    ]


def test_run_summary_gives_each_phase_its_token_bound_at_the_declared_rate():
    cells, protocol = _smollm2_cell(), effective_protocol(PLAN)
    models = {"s-arithmetic": cells["s-arithmetic"].model}
    lines = run_summary("d", cells, protocol, "cache", {}, _jobs(protocol), models)
    rate = E.RATES[("transformers", "cpu")]
    # reference first: 6 problems x 600 tokens; continuations: 6 x (cap 8 + 1) prefixes x m 5 x 150 tokens
    reference, continuations = 6 * 600, 6 * 9 * 5 * 150
    assert lines[-3] == (
        f"    s-arithmetic reference (t0.7): at most {reference:,} tokens, "
        f"{E.at_most(reference / rate)} at its declared {rate:,.0f} tokens/s"
    )
    assert lines[-2].startswith(f"    s-arithmetic continuations (registered): at most {continuations:,} tokens")
    assert lines[-1] == f"  total: {E.at_most((reference + continuations) / rate)}"
    done = run_summary("d", cells, protocol, "cache", {}, [], models)
    assert done[-1] == "  time: no generation in this run (its chains and samples are written already)"


def test_a_backend_without_a_declared_rate_is_left_to_its_first_chunk():
    cells, protocol = _smollm2_cell("cuda:0"), effective_protocol(PLAN)
    models = {"s-arithmetic": cells["s-arithmetic"].model}
    lines = run_summary("d", cells, protocol, "cache", {}, _jobs(protocol), models)
    assert (
        lines[-3]
        == "    s-arithmetic reference (t0.7): at most 3,600 tokens, no declared rate for backend transformers on cuda"
    )
    assert lines[-1] == "  total: unknown before generation starts"
    assert "each phase's first chunk tells the rest" in lines[-4]


def test_the_token_bound_counts_every_prefix_a_full_length_chain_can_have():
    protocol = effective_protocol(PLAN)
    assert E.token_bound("reference", protocol, 10) == 10 * 600
    assert E.token_bound("continuations", protocol, 10) == 10 * (8 + 1) * 5 * 150  # at most cap + 1 prefixes
    # without a cap every token of the chain may end a step
    assert E.token_bound("continuations", dict(protocol, cap=None), 10) == 10 * 601 * 5 * 150
    # (budget, stride, prefixes by hand): 0, 16, ..., 592, 600 | 0, 16, 32, 48, 64 | 0, 1 | 0
    for length, stride, prefixes in ((600, 16, 39), (64, 16, 5), (1, 16, 2), (0, 16, 1)):
        tokens = dict(protocol, checkpoints="tokens", reference_max_tokens=length, checkpoint_stride=stride)
        assert E.token_bound("continuations", tokens, 2) == 2 * prefixes * 5 * 150
    assert E.token_bound("reference", protocol, None) is None


def test_durations_read_as_a_person_says_them():
    assert E.at_most(0.2) == "under a second" and E.at_most(150) == "at most 2 min"
    assert E.duration(0.2) == "under a second"
    assert E.duration(42.4) == "about 42 s"
    assert E.duration(150) == "about 2 min"
    assert E.duration(3 * 3600) == "about 3.0 h"
    assert E.duration(float("nan")) == "an unknown time"


def test_the_rest_of_a_phase_is_forecast_at_its_first_chunks_rate_by_hand():
    # 40 of 400 pending rows in 12 s: 0.3 s a row, so 108 s for the other 360
    seconds, text = E.first_chunk_text(12.0, 40, 400)
    assert seconds == pytest.approx(108.0)
    assert text == "its first 40 of 400 pending rows took 12 s, so about 2 min for the other 360 at that rate"
    assert E.first_chunk_text(3.0, 0, 10)[1].endswith("so an unknown time for the other 10 at that rate")


class CountingBackend:
    """A backend that counts the rows it is asked for, to show no generation is drawn and thrown away."""

    def __init__(self, backend):
        self.backend, self.rows = backend, 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate(self, requests, desc="", done=None, on_done=None):
        self.rows += sum(r.n for r in requests)
        return self.backend.generate(requests, desc=desc, done=done, on_done=on_done)


def test_the_first_chunk_is_real_work_its_forecast_is_printed_and_no_sample_changes(
    tmp_path, plan, data_dir, tiny_model_dir, capsys
):
    from cotdyn.generation.run import _backend, read_problems

    problems = tmp_path / "problems.parquet"
    table = problems_table(load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 3}))
    table.to_parquet(problems, index=False)
    protocol = effective_protocol(plan, {"reference_max_tokens": 24, "continuation_max_tokens": 6, "m": 2})
    # chunks of 2 requests: the reference phase's 3 chains take two chunks, so a forecast follows the first
    model = {
        "backend": "transformers",
        "id": str(tiny_model_dir),
        "dtype": "float32",
        "transformers": {"batch_size": 4},
        "chunk_size": 2,
    }

    def run(out: Path, observer) -> tuple[bytes, bytes, int, int]:
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

    timed = run(tmp_path / "timed", E.Forecast())
    assert timed[2] == timed[3] > 3  # every row drawn is a row the phases keep: nothing drawn and thrown away
    printed = capsys.readouterr().out
    rate = E.RATES[("transformers", "cpu")]
    assert (
        f"t-gsm8k reference chains: 3 rows to generate (0 requests in the cache), at most 72 tokens, "
        f"{E.at_most(72 / rate)} at its declared {rate:,.0f} tokens/s" in printed
    )
    assert "t-gsm8k reference chains: its first 2 of 3 pending rows took" in printed
    assert "t-gsm8k continuations: its first 4 of" in printed
    assert run(tmp_path / "plain", None) == timed  # the observer changes no sample
    # everything cached: nothing to generate, nothing drawn, no forecast
    assert run(tmp_path / "timed", E.Forecast())[2] == 0
    again = capsys.readouterr().out
    assert "t-gsm8k reference chains: 0 rows to generate (3 requests in the cache)" in again
    assert "pending rows took" not in again
