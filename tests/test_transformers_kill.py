"""A kill of the transformers backend loses at most the rows in flight (docs/reference.md section 8).

Each row is told (journaled) the step it finishes; a resumed batch is handed the rows told as done,
decodes the others again from their prompt, and gives the very bits of an uninterrupted run, no
row told twice.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from killing import log_to, run_killed, stopping_transformers

from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.generation.backends import Completion, Request, Sampling
from cotdyn.generation.backends.transformers.sampler import SeededSampler
from cotdyn.plan.load import effective_protocol


class Killed(Exception):
    """What a kill does to the decode loop: it stops between two steps, or within one."""


def _requests(backend) -> list[Request]:
    ids = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 2+3?"))
    other = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 7*6?"))
    requests = [Request(ids + tuple(range(100, 100 + k)), 3, Sampling(0.7, 24), 256 * (k + 1)) for k in range(2)]
    return requests + [Request(other, 4, Sampling(0.7, 24), 1024)]  # 10 rows: a batch of 8, one of 2


def _killed_at(monkeypatch, draws: int) -> list[int]:
    """Make the sampler raise ``Killed`` at its ``draws``-th draw; the draws made, as a list's length."""
    made: list[int] = []
    original = SeededSampler.draw_rows

    def draw_rows(self, logits, rows):
        if len(made) == draws:
            raise Killed
        made.append(len(rows))
        return original(self, logits, rows)

    monkeypatch.setattr(SeededSampler, "draw_rows", draw_rows)
    return made


@pytest.mark.parametrize("share_prefill", [True, False])
def test_a_batch_killed_mid_decode_restarts_its_rows_in_flight_to_the_same_bits(
    tiny_model_dir, monkeypatch, share_prefill
):
    backend = stopping_transformers(tiny_model_dir, share_prefill)
    requests = _requests(backend)
    whole = _killed_at(monkeypatch, draws=-1)  # never killed: counts the draws of an uninterrupted run
    full = backend.generate(requests, done={}, on_done=lambda rows: None)
    steps = len(whole)
    for kill in (3, steps // 2 - 3, steps - 3):  # early and late in the first batch (of two), late in the second
        monkeypatch.undo()
        _killed_at(monkeypatch, draws=kill)
        told: list[tuple[int, int, Completion]] = []
        with pytest.raises(Killed):
            backend.generate(requests, done={}, on_done=told.extend)
        assert told  # rows finished before the kill were told (journaled)
        monkeypatch.undo()
        again: list[tuple[int, int, Completion]] = []
        assert backend.generate(requests, done={(i, j): c for i, j, c in told}, on_done=again.extend) == full
        # no row told twice, every row told once
        assert sorted((i, j) for i, j, _ in told + again) == sorted(
            (i, j) for i, r in enumerate(requests) for j in range(r.n)
        )


# --- a real kill -9 of a transformers study at a random moment ---

_SERVER = multiprocessing.get_context("forkserver")
_SERVER.set_forkserver_preload(["cotdyn.generation.run", "cotdyn.generation.backends.transformers"])
ARTIFACTS = ("chains.parquet", "samples.parquet")


def study(args: dict) -> None:
    """Reference and continuations on the tiny model, each decode step slowed to ``delay`` s; each
    row told (journaled) and each step drawn written down."""
    import torch

    from cotdyn.generation.backends.transformers import backend as B
    from cotdyn.generation.run import run_continuations, run_reference

    torch.set_num_threads(1)
    out = Path(args["out"])
    log_to(out)
    draw_rows, generate = SeededSampler.draw_rows, B.TransformersBackend.generate

    def slow_draw(self, logits, rows):
        time.sleep(args["delay"])
        with open(out / "steps.txt", "a") as f:  # a line per decode step, before its draw
            f.write(f"{len(rows)}\n")
        return draw_rows(self, logits, rows)

    def told_generate(self, requests, desc="", done=None, on_done=None):
        def told(rows):
            with open(out / "told.txt", "a") as f:
                f.writelines(f"{requests[i].key(self.model_revision)} {j}\n" for i, j, _ in rows)
            on_done(rows)

        return generate(self, requests, desc, done, told if on_done else None)

    SeededSampler.draw_rows, B.TransformersBackend.generate = slow_draw, told_generate
    common = (args["model"], args["protocol"], "tiny-gsm8k", "number", args["cache"])  # an answer type: no registry
    run_reference(args["problems"], *common, out / "chains.parquet", out / "reference.json")
    run_continuations(args["problems"], out / "chains.parquet", *common, out / "samples.parquet", out / "c.json")


def _run(args: dict, kill_at_step: int | None = None) -> int | None:
    """Run a study; with ``kill_at_step``, SIGKILL it once that many decode steps are drawn."""
    return run_killed(_SERVER, study, args, Path(args["out"]) / "steps.txt", kill_at_step, timeout=600)


def _lines(args: dict, name: str) -> list[str]:
    path = Path(args["out"]) / name
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_a_transformers_study_killed_at_random_moments_generates_no_request_twice(
    tiny_model_dir, data_dir, plan, tmp_path
):
    problems = load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 3})
    problems_table(problems).to_parquet(tmp_path / "problems.parquet", index=False)
    protocol = effective_protocol(plan, {"reference_max_tokens": 40, "continuation_max_tokens": 8, "dtype": "float32"})
    model = {
        "backend": "transformers",
        "id": str(tiny_model_dir),
        "dtype": "float32",
        "transformers": {"batch_size": 16},
    }
    base = {"problems": str(tmp_path / "problems.parquet"), "model": model, "protocol": protocol}
    base |= {"delay": 0.02}
    baseline = {**base, "out": str(tmp_path / "baseline" / "out"), "cache": str(tmp_path / "baseline" / "cache")}
    assert _run(baseline) == 0, "\n".join(_lines(baseline, "run.log")[-20:])
    steps = len(_lines(baseline, "steps.txt"))
    rng = random.Random(5353)
    for trial in range(3):
        args = {**base, "out": str(tmp_path / f"t{trial}" / "out"), "cache": str(tmp_path / f"t{trial}" / "cache")}
        assert _run(args, kill_at_step=rng.randrange(2, steps - 2)) == -signal.SIGKILL
        killed = len(_lines(args, "steps.txt"))
        assert 0 < killed < steps
        assert _run(args) == 0, "\n".join(_lines(args, "run.log")[-20:])
        for name in ARTIFACTS:
            assert (Path(args["out"]) / name).read_bytes() == (Path(baseline["out"]) / name).read_bytes(), name
        told = Counter(_lines(args, "told.txt"))
        assert told.keys() == Counter(_lines(baseline, "told.txt")).keys()
        assert max(told.values()) == 1  # no request's sample generated twice: 0
        assert not list(Path(args["cache"]).glob("*/*.journal"))
