"""A batch being decoded is snapshotted every few seconds, and a kill loses only the seconds since (issue 53).

The transformers backend's rows in flight were lost by a kill, however long their batch had run: a
batch whose rows all run to their budget finishes them together at its end. Now the decode loop
saves its state (``cotdyn.generation.snapshots``, ``transformers.resume``) and a resumed batch
decodes on from it, to the very bits of an uninterrupted run, no row told (journaled) twice.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from killing import log_to, run_killed

from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.generation import snapshots as S
from cotdyn.generation.backends import Completion, Request, Sampling, make_backend
from cotdyn.generation.backends.transformers.sampler import SeededSampler
from cotdyn.plan.load import effective_protocol


class Killed(Exception):
    """What a kill does to the decode loop: it stops between two steps, or within one."""


def _backend(model_dir, share_prefill: bool):
    backend = make_backend(
        {"backend": "transformers", "id": str(model_dir), "dtype": "float32", "batch_size": 8}
        | {"share_prefill": share_prefill}
    )
    # a twentieth of the vocabulary stops a row: rows end at different steps, some at the budget
    backend.stop_ids = set(range(2, len(backend.tokenizer.hf), 20)) | backend.stop_ids
    return backend


def _requests(backend) -> list[Request]:
    ids = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 2+3?"))
    other = tuple(backend.tokenizer.chat_prompt_ids("Solve.", "What is 7*6?"))
    requests = [Request(ids + tuple(range(100, 100 + k)), 3, Sampling(0.7, 24), 256 * (k + 1)) for k in range(2)]
    return requests + [Request(other, 4, Sampling(0.7, 24), 1024)]  # 10 rows: a batch of 8, one of 2


class EveryStep(S.SnapshotStore):
    seconds, cost_ratio = 0.0, 0.0  # a snapshot after every step: a kill anywhere finds one a step old


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
def test_a_batch_killed_mid_decode_resumes_from_its_last_snapshot_to_the_same_bits(
    tiny_model_dir, tmp_path, monkeypatch, share_prefill
):
    backend = _backend(tiny_model_dir, share_prefill)
    requests = _requests(backend)
    full = backend.generate(requests, done={}, on_done=lambda rows: None)
    whole = _killed_at(monkeypatch, draws=-1)  # never killed: counts the draws of an uninterrupted run
    assert backend.generate(requests, done={}, on_done=lambda rows: None, snapshots=EveryStep(tmp_path)) == full
    assert not list(tmp_path.iterdir())  # each batch's snapshots removed once its rows are told
    steps = len(whole)
    for kill in (3, steps // 2 - 3, steps - 3):  # early and late in the first batch (of two), late in the second
        store = EveryStep(tmp_path / f"kill{kill}")
        store.directory.mkdir()
        monkeypatch.undo()
        _killed_at(monkeypatch, draws=kill)
        told: list[tuple[int, int, Completion]] = []
        with pytest.raises(Killed):
            backend.generate(requests, done={}, on_done=told.extend, snapshots=store)
        assert list(store.directory.glob(f"*{S.SUFFIX}"))  # the kill left the batch's snapshots
        monkeypatch.undo()
        resumed = _killed_at(monkeypatch, draws=-1)
        prefills: list = []
        prefill = backend._prefill
        monkeypatch.setattr(backend, "_prefill", lambda ids: prefills.append(ids) or prefill(ids))
        done = {(i, j): c for i, j, c in told}
        again: list[tuple[int, int, Completion]] = []
        assert backend.generate(requests, done=done, on_done=again.extend, snapshots=store) == full
        assert not prefills  # each root of a killed batch (both roots are in the first) from its snapshot
        # no row told twice, every row told once, and the resumed run decoded on, not from the start
        assert sorted((i, j) for i, j, _ in told + again) == sorted(
            (i, j) for i, r in enumerate(requests) for j in range(r.n)
        )
        assert len(resumed) <= steps - kill + 1, (len(resumed), steps, kill)
        assert not list(store.directory.glob(f"*{S.SUFFIX}"))


def test_a_damaged_snapshot_is_not_used_and_the_batch_decodes_from_the_one_before(
    tiny_model_dir, tmp_path, monkeypatch
):
    backend = _backend(tiny_model_dir, True)
    requests = _requests(backend)
    full = backend.generate(requests, done={}, on_done=lambda rows: None)
    store = EveryStep(tmp_path)
    _killed_at(monkeypatch, draws=6)
    told: list = []
    with pytest.raises(Killed):
        backend.generate(requests, done={}, on_done=told.extend, snapshots=store)
    segments = sorted(p for p in tmp_path.glob(f"*{S.SUFFIX}") if not p.name.startswith("root-"))  # one batch's
    assert len({p.name.split(".")[0] for p in segments}) == 1
    assert len(segments) >= 4
    data = bytearray(segments[2].read_bytes())
    data[-5] ^= 1  # one bit of a tensor: the checksum fails
    segments[2].write_bytes(bytes(data))
    loaded = store.load(segments[0].name.split(".")[0])
    assert len(loaded) == 2  # segments 0 and 1; from the damaged one on, none
    monkeypatch.undo()
    again: list = []
    assert (
        backend.generate(requests, done={(i, j): c for i, j, c in told}, on_done=again.extend, snapshots=store) == full
    )
    assert len(told) + len(again) == sum(r.n for r in requests)


# --- a real kill -9 of a transformers study at a random moment ---

_SERVER = multiprocessing.get_context("forkserver")
_SERVER.set_forkserver_preload(["cotdyn.generation.run", "cotdyn.generation.backends.transformers"])
ARTIFACTS = ("chains.parquet", "samples.parquet")


def study(args: dict) -> None:
    """Reference and continuations on the tiny model, each decode step slowed to ``delay`` s and
    snapshotted every ``every`` s; each row told (journaled) and each step drawn written down."""
    import torch

    from cotdyn.generation.backends.transformers import backend as B
    from cotdyn.generation.run import run_continuations, run_reference

    torch.set_num_threads(1)
    out = Path(args["out"])
    log_to(out)
    S.SnapshotStore.seconds, S.SnapshotStore.cost_ratio = args["every"], 0.0  # every 0.1 s, however long a write
    draw_rows, generate = SeededSampler.draw_rows, B.TransformersBackend.generate

    def slow_draw(self, logits, rows):
        time.sleep(args["delay"])
        with open(out / "steps.txt", "a") as f:  # a line per decode step, before its draw
            f.write(f"{len(rows)}\n")
        return draw_rows(self, logits, rows)

    def told_generate(self, requests, desc="", done=None, on_done=None, snapshots=None):
        def told(rows):
            with open(out / "told.txt", "a") as f:
                f.writelines(f"{requests[i].key(self.model_revision)} {j}\n" for i, j, _ in rows)
            on_done(rows)

        return generate(self, requests, desc, done, told if on_done else None, snapshots)

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
    model = {"backend": "transformers", "id": str(tiny_model_dir), "dtype": "float32", "batch_size": 16}
    base = {"problems": str(tmp_path / "problems.parquet"), "model": model, "protocol": protocol}
    base |= {"delay": 0.02, "every": 0.1}
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
        # the resumed run decoded on from the last snapshot: at most the steps of 0.1 s (5) and the
        # one in flight drawn again, not the batch's steps so far
        redone = len(_lines(args, "steps.txt")) - steps  # the killed run's steps and the resumed one's
        assert redone <= 8, (killed, steps, redone)
        assert not list(Path(args["cache"]).glob(f"*/*{S.SUFFIX}")) and not list(
            Path(args["cache"]).glob("*/*.journal")
        )
