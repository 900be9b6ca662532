"""scripts/gpu_sweep_vllm.py: the grid, the choice of the best setting, the budget, and its dry run
(every setting in its own process, against the stand-in vLLM)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check_vllm as check  # noqa: E402
import gpu_sweep_vllm as sweep  # noqa: E402

from cotdyn.generation.backends import Request, Sampling  # noqa: E402


def test_the_grid_in_order_with_chunked_prefill_and_graphs_up_to_max_num_seqs():
    settings = sweep.grid([1024, 2048], [16384, 1536], ["max_num_seqs", "default"])
    assert [
        (s["max_num_seqs"], s["max_num_batched_tokens"], s.get("max_cudagraph_capture_size")) for s in settings
    ] == [
        (1024, 16384, 1024),
        (1024, 16384, None),
        (1024, 1536, 1024),
        (1024, 1536, None),
        (2048, 16384, 2048),
        (2048, 16384, None),
        (2048, 1536, 1536),  # no graph larger than an engine step's tokens
        (2048, 1536, None),
    ]
    assert all(s["enable_chunked_prefill"] is True for s in settings)
    assert sweep.label({}) == "vllm defaults"
    assert sweep.label(settings[1]) == "max_num_seqs=1024, max_num_batched_tokens=16384, enable_chunked_prefill=True"


def test_the_best_row_is_the_finished_one_with_the_most_tokens_per_second():
    rows = [
        {"status": "ok", "tokens_per_s": 27_000.0, "label": "a"},
        {"status": "timed out (budget)", "label": "b"},
        {"status": "ok", "tokens_per_s": 31_000.0, "label": "c"},
        {"status": "failed", "tokens_per_s": 99_000.0, "label": "d"},
    ]
    assert sweep.best_row(rows)["label"] == "c"
    assert sweep.best_row(rows[1:2]) is None


def test_the_vllm_block_lays_the_setting_over_the_entrys_own_options_and_pastes_as_yaml():
    block = sweep.vllm_block({"load_format": "dummy"}, {"max_num_seqs": 2048, "enable_chunked_prefill": True})
    assert yaml.safe_load(block) == {
        "vllm": {"load_format": "dummy", "max_num_seqs": 2048, "enable_chunked_prefill": True}
    }
    assert block.startswith("vllm:\n  load_format: dummy\n")


def test_the_summary_reports_the_best_against_the_target():
    work = {"cell": "c", "peak_tflops": 989.0, "flops_per_generated_token": 1.4e10, "entry_vllm": {}}
    rows = [{"status": "ok", "tokens_per_s": 1.0, "utilisation": 0.59, "label": "x", "setting": {"max_num_seqs": 8}}]
    report = sweep.summary(rows, work, 0.6)
    assert report["best_meets_target"] is False and report["not_run"] == []
    assert sweep.summary([dict(rows[0], utilisation=0.6)], work, 0.6)["best_meets_target"] is True
    empty = sweep.summary([{"status": "not run: budget", "label": "x"}], work, 0.6)
    assert empty["best"] is None and empty["vllm_block"] is None and empty["not_run"] == ["x"]


def test_requests_survive_the_file_between_processes():
    requests = [
        Request((1, 5, 9), 5, Sampling(0.7, 150, top_p=0.95, top_k=40, repetition_penalty=1.1), 1234, "continuation"),
        Request((1,), 1, Sampling(0.0, 600), 7, "reference"),
    ]
    assert sweep.requests_from_json(json.loads(json.dumps(sweep.requests_to_json(requests)))) == requests


def test_the_flop_rate_of_a_generated_token_is_twice_the_matrix_parameters():
    config = {**check.QWEN2_7B, "bos_token_id": 1, "eos_token_id": 2}
    assert check.flops_per_generated_token(config) == 2.0 * check.parameters(config)["matmul"]
    assert check.flops_per_generated_token(config) == pytest.approx(14.1e9, rel=0.01)  # docs/generation-cost.md


def _run(tmp_path, *extra):
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu_sweep_vllm.py"),
            "--dry-run",
            "--out",
            str(tmp_path / "out"),
            "--model-dir",
            str(tmp_path / "model"),
            "--problems",
            "3",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_the_dry_run_times_each_setting_in_its_own_engine_and_records_what_the_engine_made_of_it(tmp_path):
    done = _run(tmp_path, "--max-num-seqs", "512", "--max-num-batched-tokens", "8192")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = tmp_path / "out"
    rows = [json.loads(line) for line in (out / "gpu_sweep_vllm.jsonl").read_text().splitlines()]
    report = json.loads((out / "gpu_sweep_vllm.json").read_text())
    assert report["rows"] == rows and [r["status"] for r in rows] == ["ok", "ok"]
    defaults, tuned = rows
    # vLLM's own settings first: its row makes the requests and starts the phase from an emptied cache
    assert defaults["setting"] == {} and defaults["made_requests"] is True and defaults["prefix_cache_reset"] is True
    assert (defaults["engine_settings"]["max_num_seqs"], defaults["engine_settings"]["max_num_batched_tokens"]) == (
        1024,
        16384,
    )
    assert tuned["made_requests"] is False and tuned["prefix_cache_reset"] is None
    assert tuned["setting"] == {
        "max_num_seqs": 512,
        "max_num_batched_tokens": 8192,
        "enable_chunked_prefill": True,
        "max_cudagraph_capture_size": 512,
    }
    effective = tuned["engine_settings"]
    assert {k: effective[k] for k in tuned["setting"]} == tuned["setting"]  # read back from the engine
    assert effective["cudagraph_capture_sizes"][-1] == 512
    assert tuned["vllm_version"] == "0.26.0-standin"
    # the same requests in every setting: the same prompt tokens and samples
    for key in ("requests", "samples", "prompt_tokens", "generated_tokens", "calls"):
        assert defaults[key] == tuned[key]
    assert defaults["requests"] == len(json.loads((out / "requests.json").read_text())) > 3
    for row in rows:  # gpu_check_vllm's one definition of the rate and the utilisation
        assert row["tokens_per_s"] == pytest.approx(row["generated_tokens"] / row["seconds"])
        assert row["utilisation"] == pytest.approx(
            row["tokens_per_s"] * report["flops_per_generated_token"] / 1e12 / report["peak_tflops"]
        )
    assert report["flops_per_generated_token"] == check.flops_per_generated_token(
        json.loads((tmp_path / "model" / "config.json").read_text())
    )
    best = max(rows, key=lambda r: r["tokens_per_s"])
    assert report["best"] == best
    assert yaml.safe_load(report["vllm_block"]) == {"vllm": {"load_format": "dummy", **best["setting"]}}
    assert report["vllm_block"] in done.stdout


@pytest.mark.slow
def test_with_no_budget_left_no_setting_starts_and_the_report_says_so(tmp_path):
    done = _run(tmp_path, "--budget-s", "0", "--max-num-seqs", "512", "--max-num-batched-tokens", "8192")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "gpu_sweep_vllm.json").read_text())
    assert [r["status"] for r in report["rows"]] == ["not run: budget", "not run: budget"]
    assert report["best"] is None and len(report["not_run"]) == 2
    assert len((tmp_path / "out" / "gpu_sweep_vllm.jsonl").read_text().splitlines()) == 2


def test_a_setting_past_its_time_is_stopped_and_a_failing_one_reports_its_log(tmp_path):
    from types import SimpleNamespace

    args = SimpleNamespace(dry_run=True)
    # The process is still importing after a tenth of a second: it is stopped, its group with it.
    row = sweep.run_child(args, tmp_path, 0, {"max_num_seqs": 8}, timeout=0.1)
    assert row["status"] == "timed out (budget)" and row["label"] == "max_num_seqs=8"
    assert row["process_s"] < 30
    # With no work.json (nothing prepared) the setting's process fails, and the row carries why.
    row = sweep.run_child(args, tmp_path, 1, {}, timeout=300)
    assert row["status"] == "failed" and row["exit_code"] == 1
    assert "work.json" in row["log_tail"]
