"""A kill loses at most the samples in flight (issue 53, cotdyn.generation.journal).

Each finished sample is journaled the moment the backend finishes it; a run resumed after a
``kill -9`` mid-chunk hands the backend what is journaled and draws only the rest, and ends with the
same bytes (chains, samples, records, and the cache's own shards) as a run never interrupted.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from killing import log_to, run_killed, stopping_transformers

from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.generation import journal as J
from cotdyn.generation.backends import Completion, Request, Sampling
from cotdyn.generation.backends.simulated import SimulatedBackend
from cotdyn.plan.load import effective_protocol

ARTIFACTS = ("chains.parquet", "samples.parquet", "records.parquet")
_SERVER = multiprocessing.get_context("forkserver")
_SERVER.set_forkserver_preload(["cotdyn.generation.run", "cotdyn.generation.backends.simulated"])


# --- the journal file ---


def test_a_torn_last_line_or_an_altered_line_is_skipped_and_the_rest_read(tmp_path):
    journal = J.Journal(tmp_path)
    rows = [(f"k{i}", j, Completion((i, j), f"text {i} {j} ✓", "stop")) for i in range(3) for j in range(2)]
    journal.append(rows[:4])
    journal.append(rows[4:])
    found, skipped = J.read(journal.path)
    assert skipped == 0 and found == {k: {j: c for kk, j, c in rows if kk == k} for k in ("k0", "k1", "k2")}
    data = journal.path.read_bytes()
    lines = data.split(b"\n")
    altered = lines[1].replace(b"text", b"TEXT")  # valid JSON, wrong checksum
    journal.path.write_bytes(b"\n".join([lines[0], altered, *lines[2:]])[:-9])  # the last line torn
    found, skipped = J.read(journal.path)
    assert skipped == 2
    assert found == {"k0": {0: rows[0][2]}, "k1": {0: rows[2][2], 1: rows[3][2]}, "k2": {0: rows[4][2]}}
    journal.remove()
    assert not journal.path.exists()


# --- the transformers backend: a partly done batch gives the other rows their bits ---


@pytest.mark.parametrize("share_prefill", [True, False])
def test_transformers_tells_each_row_as_it_stops_and_a_resumed_batch_redraws_none_of_its_done_rows(
    tiny_model_dir, share_prefill
):
    backend = stopping_transformers(tiny_model_dir, share_prefill)
    ids = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 2+3?"))
    other = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 7*6?"))
    requests = [Request(ids + tuple(range(100, 100 + k)), 3, Sampling(0.7, 16), 256 * (k + 1)) for k in range(2)]
    requests += [Request(other, 4, Sampling(0.7, 16), 1024)]  # 10 rows: a batch of 8, one of 2
    told: list[list[tuple[int, int, Completion]]] = []
    full = backend.generate(requests, done={}, on_done=told.append)
    rows = {(i, j): c for i, out in enumerate(full) for j, c in enumerate(out)}
    assert sorted(call[0][:2] for call in told) == sorted(rows)  # each row told once
    assert all(len(call) == 1 and rows[call[0][:2]] == call[0][2] for call in told)
    # told the step each stops: the first batch's 8 rows in the order of their lengths (stopping at
    # different steps), not in the batch's order at its end
    lengths = [len(call[0][2].token_ids) for call in told[:8]]
    assert lengths == sorted(lengths) and len(set(lengths)) > 3, lengths
    # what a kill after the first third of the tells leaves journaled, and any other subset
    first = [call[0][:2] for call in told[: len(told) // 3]]
    for kept in (first, random.Random(53).sample(sorted(rows), 6)):
        done = {ij: rows[ij] for ij in kept}
        again: list = []
        assert backend.generate(requests, done=done, on_done=again.extend) == full
        assert sorted((i, j) for i, j, _ in again) == sorted(set(rows) - set(done))  # none drawn twice


# --- a real kill -9 mid-chunk, on the simulated backend slowed down ---


class Slow(SimulatedBackend):
    """The simulated model taking ``delay`` s a sample, writing down each sample it draws (``drawn``);
    with ``kill_after``, it kills its own process once that many samples are journaled."""

    def __init__(self, golds, benchmark, drawn: Path, delay: float, kill_after: int | None):
        super().__init__(golds, benchmark)
        self.drawn, self.delay, self.kill_after, self.journaled = drawn, delay, kill_after, 0

    def _complete(self, request, j):
        time.sleep(self.delay)
        with open(self.drawn, "a") as f:  # a line per sample as it is drawn, before any journaling
            f.write(f"{request.key(self.model_revision)} {j}\n")
        return super()._complete(request, j)

    def generate(self, requests, desc="", done=None, on_done=None):
        def journaled(rows):
            on_done(rows)
            self.journaled += len(rows)
            if self.kill_after is not None and self.journaled >= self.kill_after:
                os.kill(os.getpid(), signal.SIGKILL)  # right after a journal write, as a kill may land

        return super().generate(requests, desc, done, journaled if on_done else None)


def study(args: dict) -> None:
    from cotdyn.generation.run import read_problems, run_continuations, run_reference
    from cotdyn.records.derive import derive_records

    out = Path(args["out"])
    log_to(out)
    golds = {p.question: p.gold for p in read_problems(args["problems"])}
    backend = Slow(golds, "gsm8k", out / "drawn.txt", args["delay"], args.get("kill_after"))
    common = (args["model"], args["protocol"], args["cell"], "gsm8k", args["cache"])
    run_reference(args["problems"], *common, out / "chains.parquet", out / "reference.json", backend=backend)
    run_continuations(
        args["problems"], out / "chains.parquet", *common, out / "samples.parquet", out / "c.json", backend=backend
    )
    derive_records(
        out / "chains.parquet",
        out / "samples.parquet",
        args["protocol"],
        args["exclusion"],
        "gsm8k",
        args["cell"],
        out / "records.parquet",
        out / "summary.json",
    )


def _run(args: dict, kill_at_line: int | None = None) -> int | None:
    return run_killed(_SERVER, study, args, Path(args["out"]) / "drawn.txt", kill_at_line, timeout=120)


def _drawn(args: dict) -> Counter:
    return Counter((Path(args["out"]) / "drawn.txt").read_text().splitlines())


def _cache_files(args: dict) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(args["cache"]).glob("*/*")}


@pytest.fixture(scope="module")
def slow_study(data_dir, plan, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("journal")
    problems = load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 6})
    problems_table(problems).to_parquet(root / "problems.parquet", index=False)
    base = {
        "problems": str(root / "problems.parquet"),
        "model": {"backend": "simulated"},  # no chunk_size: each phase is one chunk, as in issue 50
        "protocol": effective_protocol(plan),
        "exclusion": plan["exclusion"],
        "cell": "qwen7b-gsm8k",
        "delay": 0.002,
    }
    baseline = {**base, "out": str(root / "baseline" / "out"), "cache": str(root / "baseline" / "cache")}
    assert _run(baseline) == 0
    return {"root": root, "base": base, "baseline": baseline}


def _resume_and_compare(args: dict, baseline: dict) -> Counter:
    assert _run(args) == 0, (Path(args["out"]) / "run.log").read_text()[-2000:]
    for name in ARTIFACTS:
        assert (Path(args["out"]) / name).read_bytes() == (Path(baseline["out"]) / name).read_bytes(), name
    # the same shards, byte for byte, and no journal or temporary left behind
    assert _cache_files(args) == _cache_files(baseline)
    return _drawn(args)


@pytest.mark.slow  # generation in child processes, killed and resumed
def test_a_kill_mid_chunk_then_a_resume_draws_no_sample_twice(slow_study):
    baseline, total = slow_study["baseline"], sum(_drawn(slow_study["baseline"]).values())
    assert set(_drawn(baseline).values()) == {1}
    rng = random.Random(5301)
    for trial, kill_after in enumerate([3, rng.randrange(10, total - 10)]):  # in the reference, continuation phase
        args = {**slow_study["base"], "kill_after": kill_after}
        args |= {
            "out": str(slow_study["root"] / f"self{trial}" / "out"),
            "cache": str(slow_study["root"] / f"self{trial}" / "cache"),
        }
        assert _run(args) == -signal.SIGKILL
        assert kill_after <= sum(_drawn(args).values()) < total  # killed mid-phase, each phase one chunk
        assert list(Path(args["cache"]).glob("*/*.journal"))  # the kill left a journal
        drawn = _resume_and_compare({**args, "kill_after": None}, baseline)
        assert sum(drawn.values()) == total and max(drawn.values()) == 1  # every sample drawn once: 0 twice


@pytest.mark.slow  # generation in child processes, killed and resumed
def test_kills_at_random_moments_redraw_at_most_the_request_in_flight(slow_study, protocol):
    baseline, total = slow_study["baseline"], sum(_drawn(slow_study["baseline"]).values())
    rng = random.Random(20261206)
    for trial in range(3):
        args = {**slow_study["base"]}
        args |= {
            "out": str(slow_study["root"] / f"ext{trial}" / "out"),
            "cache": str(slow_study["root"] / f"ext{trial}" / "cache"),
        }
        assert _run(args, kill_at_line=rng.randrange(1, total - 5)) == -signal.SIGKILL
        drawn = _resume_and_compare(args, baseline)
        # the simulated backend journals a request's samples together: a kill loses at most those
        assert sum(drawn.values()) - total <= protocol["m"], drawn.most_common(3)


@pytest.fixture(scope="module")
def protocol(plan) -> dict:
    return effective_protocol(plan)
