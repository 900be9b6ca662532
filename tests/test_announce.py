from pathlib import Path

from cotdyn.generation import timings
from cotdyn.generation.announce import problem_count, registered_sizes, run_summary
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


def _smollm2_cell() -> dict[str, Cell]:
    model = {"backend": "transformers", "gguf": {"package": "p", "file": "m.gguf"}, "device": "cpu", "batch_size": 64}
    return {"s-arithmetic": Cell("s-arithmetic", "s", "arithmetic", model, {"kind": "arithmetic", "n": 6, "seed": 7})}


def _jobs(protocol: dict) -> list:
    return [
        ("continuations", "s-arithmetic", "registered", protocol, 2),
        ("reference", "s-arithmetic", "t0.7", protocol, 2),
    ]


def test_run_summary_estimates_from_the_ledger_of_this_machine(tmp_path):
    cells, protocol = _smollm2_cell(), effective_protocol(PLAN)
    models = {"s-arithmetic": dict(cells["s-arithmetic"].model, dtype="float32")}
    host = {"cpu_model": "AMD EPYC", "cpus": 2, "usable_cpus": 2, "gpus": []}
    common = {"model": models["s-arithmetic"], "revision": "local-x", "benchmark": "arithmetic", "protocol": protocol}
    common |= {"host": host, "threads": 2, "recorded": "2026-12-01T10:00:00Z", "cached_requests": 0}
    work = {"problems": 6, "requests": 6, "samples": 6, "generated_tokens": 1500, "seconds": 50.0}
    timings.write_observation(timings.observation(phase="reference", **common, **work), tmp_path)
    (tmp_path / timings.OBSERVATIONS / "foreign.json").write_text('{"format": "something else"}')
    lines = run_summary("d", cells, protocol, str(tmp_path), {}, _jobs(protocol), models, host)
    estimate = lines[lines.index(next(x for x in lines if x.startswith("  time estimate"))) :]
    assert any("foreign.json" in x and "skipping" in x for x in lines[:-4])
    # reference first: 6 problems x 250 tokens / 30 tokens/s = 50 s
    assert estimate[1].startswith(
        "    s-arithmetic reference (t0.7): about 50 s (6 problems x 250 tokens / 30 tokens/s"
    )
    assert "1 timing on this machine, latest 2026-12-01T10:00:00Z" in estimate[1]
    assert estimate[2] == f"    s-arithmetic continuations (registered): at most 40,500 tokens; {timings.NO_TIMING}"
    assert estimate[3] == "  total: about 50 s for 1 of 2 phases; the others have no timing yet"


def test_run_summary_without_a_ledger_states_the_bounds(tmp_path):
    cells, protocol = _smollm2_cell(), effective_protocol(PLAN)
    models = {"s-arithmetic": cells["s-arithmetic"].model}
    lines = run_summary("d", cells, protocol, str(tmp_path / "cache"), {}, _jobs(protocol), models)
    assert lines[-3] == f"    s-arithmetic reference (t0.7): at most 3,600 tokens; {timings.NO_TIMING}"
    assert lines[-1] == "  total: unknown before generation starts (no timing of these phases on this machine yet)"
    done = run_summary("d", cells, protocol, str(tmp_path / "cache"), {}, [], models)
    assert done[-1] == "  time: no generation in this run (its chains and samples are written already)"


def test_run_summary_says_a_phase_in_the_cache_generates_nothing(tmp_path):
    cells, protocol = _smollm2_cell(), effective_protocol(PLAN)
    models = {"s-arithmetic": dict(cells["s-arithmetic"].model, dtype="float32")}
    host = {"cpu_model": "AMD EPYC", "cpus": 2, "usable_cpus": 2, "gpus": []}
    entry = cells["s-arithmetic"].benchmark  # what the job is given, and what the start of the run reads
    done = timings.work("reference", models["s-arithmetic"], "s-arithmetic", "arithmetic", protocol, 6, entry)
    observed = timings.observation(
        phase="reference",
        work=done,
        shards={"f00d.json": 6},
        model=models["s-arithmetic"],
        revision="local/x",
        benchmark="arithmetic",
        protocol=protocol,
        problems=6,
        requests=6,
        cached_requests=0,
        samples=6,
        generated_tokens=1500,
        seconds=50.0,
        host=dict(host, gpus=["NVIDIA H200"]),  # timed elsewhere: its speed is not this machine's
        threads=2,
        recorded="2026-12-01T10:00:00Z",
    )
    timings.write_observation(observed, tmp_path)
    (tmp_path / "local_x").mkdir()
    (tmp_path / "local_x" / "f00d.json").write_text("{}")
    jobs = _jobs(protocol)
    lines = run_summary("d", cells, protocol, str(tmp_path), {}, jobs, models, host)
    assert lines[-3] == "    s-arithmetic reference (t0.7): in the cache from 1 earlier run: no generation expected"
    assert lines[-1] == "  total: no generation expected for 1 of 2 phases; the others have no timing yet"
    lines = run_summary("d", cells, protocol, str(tmp_path), {}, jobs[1:], models, host)
    assert lines[-1] == "  total: no generation expected (every phase's requests are in the cache)"
    (tmp_path / "local_x" / "f00d.json").unlink()  # the cache deleted
    lines = run_summary("d", cells, protocol, str(tmp_path), {}, jobs[1:], models, host)
    assert lines[-2] == f"    s-arithmetic reference (t0.7): at most 3,600 tokens; {timings.NO_TIMING}"
