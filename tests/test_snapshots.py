"""A batch being decoded is snapshotted every few seconds, and a kill loses only the seconds since (issue 53).

The transformers backend's rows in flight were lost by a kill, however long their batch had run: a
batch whose rows all run to their budget finishes them together at its end. Now the decode loop
saves its state (``cotdyn.generation.snapshots``, ``transformers.resume``) and a resumed batch
decodes on from it, to the very bits of an uninterrupted run, no row told (journaled) twice.
"""

from __future__ import annotations

import pytest

from cotdyn.generation import snapshots as S
from cotdyn.generation.backends import Completion, Request, Sampling, make_backend
from cotdyn.generation.backends.transformers.sampler import SeededSampler


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
    seconds = 0.0  # a snapshot after every step: a kill anywhere finds one a step old


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
        done = {(i, j): c for i, j, c in told}
        again: list[tuple[int, int, Completion]] = []
        assert backend.generate(requests, done=done, on_done=again.extend, snapshots=store) == full
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
    segments = sorted(tmp_path.glob(f"*{S.SUFFIX}"))
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
