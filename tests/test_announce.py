from pathlib import Path

from cotdyn.announce import problem_count, registered_sizes, run_summary
from cotdyn.config import Cell
from cotdyn.plan import load_plan

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
    assert problem_count({"kind": "math500"}, sizes) == 500
    assert problem_count({"kind": "gsm8k", "path": "x.jsonl"}, sizes) == 1319
    assert problem_count({"kind": "jsonl", "path": "own.jsonl"}, sizes) is None
