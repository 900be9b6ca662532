"""A batch's decoding saved as it goes and taken up again after a kill (issue 53, ``cotdyn.generation.snapshots``).

The compacting decode loop's state between two steps is all a step reads: the step, which samples
the batch's rows are (``running``) and which still run (``live``), each sample's tokens so far, the
next inputs, positions and attention mask, the keys and values, and each sample's generator. Saved
as it is (keys and values as the decode computed them, never rebuilt), it gives every later step
the bits of an uninterrupted run. The batch's segments hold the columns decoded, not the prompts':
those are the batch's starting cache, built again as the killed run built it, from its roots'
prefills (``TransformersBackend._row_cache``), each saved the moment it was computed
(``RootSnapshots``): on a loaded CPU a batch's 40 prefills can take minutes, all of which a kill
would otherwise lose. Without shared prefill the first step computes the prompts' columns in the
batch, and the segments hold them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass

import torch
from transformers import DynamicCache

VERSION = 1  # of the segments' layout: a resumed run of another layout decodes afresh


@dataclass
class DecodeState:
    """The compacting decode loop's state before step ``step``."""

    step: int
    running: list[int]  # batch row k is sample running[k]
    live: torch.Tensor  # bool, by batch row
    out: list[list[int]]  # tokens by sample
    inputs: torch.Tensor
    positions: torch.Tensor
    attention: torch.Tensor | None
    cache: DynamicCache


def batch_name(settings: dict, rows: list[tuple[str, int]]) -> str:
    """A batch's snapshot name: its rows' content addresses and sample indices, and the settings that decide its bits."""
    payload = json.dumps([VERSION, settings, rows], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class BatchSnapshots:
    """One batch's snapshots in ``store`` (a ``SnapshotStore``): saved at most every ``store.seconds``."""

    def __init__(self, store, name: str, keys: list[str]):
        self.store, self.name, self.keys = store, name, sorted(set(keys))
        self.index, self.columns, self.last, self.cost = 0, 0, time.monotonic(), 0.0
        self._segments: list | None = None

    def segments(self) -> list[tuple[dict, dict]]:
        """The batch's segments in the store, read once."""
        if self._segments is None:
            self._segments = self.store.load(self.name)
        return self._segments

    def save_if_due(self, state: DecodeState, generators: list[torch.Generator]) -> None:
        if time.monotonic() - self.last < max(self.store.seconds, self.store.cost_ratio * self.cost):
            return
        began = time.monotonic()
        end = state.cache.get_seq_length()
        tensors = {"live": state.live, "inputs": state.inputs, "positions": state.positions}
        tensors["generators"] = torch.stack([g.get_state() for g in generators])
        if state.attention is not None:
            tensors["attention"] = state.attention
        for i, layer in enumerate(state.cache.layers):
            tensors[f"keys.{i}"] = layer.keys[:, :, self.columns : end]
            tensors[f"values.{i}"] = layer.values[:, :, self.columns : end]
        meta = {"keys": self.keys, "step": state.step, "running": state.running, "out": state.out}
        self.store.save(self.name, self.index, tensors, meta | {"columns": [self.columns, end]})
        self.index, self.columns, self.last = self.index + 1, end, time.monotonic()
        self.cost = self.last - began

    def restore(self, start: DecodeState, generators: list[torch.Generator], config) -> DecodeState | None:
        """The state of the last snapshot, built on ``start`` (the batch's state before its first step);
        None when there is none or it does not fit the batch (then the batch decodes from its start)."""
        self.columns = start.cache.get_seq_length()
        segments = self.segments()
        if not segments:
            return None
        try:
            state, states = _rebuilt(segments, start, config, len(generators))
            for generator, saved in zip(generators, states):  # a state the generator refuses: none used
                torch.Generator(device=generator.device).set_state(saved)
        except (ValueError, KeyError, IndexError, TypeError, RuntimeError) as e:
            print(f"generation cache: snapshots of batch {self.name} not used ({e})", file=sys.stderr)
            self.remove()  # the batch decodes from its start and writes its own segments from 0
            self._segments = []
            return None
        for generator, saved in zip(generators, states):
            generator.set_state(saved)
        self.index, self.columns = len(segments), state.cache.get_seq_length()
        return state

    def remove(self) -> None:
        self.store.remove(self.name)


class RootSnapshots:
    """Each root's prefill, saved in ``store`` the moment it is computed (``root-<hash>``, one segment):
    a kill during a batch's prefills, or after, loses none of them, and a resumed batch prefills only
    the roots no run has. Removed once the root's last row is decoded."""

    def __init__(self, store, settings: dict, keys: list[str]):
        self.store, self.settings, self.keys = store, settings, keys  # keys: by request index

    def _name(self, prompt_ids) -> str:
        return "root-" + batch_name(self.settings, [list(prompt_ids)])

    def load(self, prompt_ids, device) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        segments = self.store.load(self._name(prompt_ids))
        tensors = segments[0][1] if segments else {}
        kv = []
        while f"keys.{len(kv)}" in tensors and f"values.{len(kv)}" in tensors:
            kv.append((tensors[f"keys.{len(kv)}"].to(device), tensors[f"values.{len(kv)}"].to(device)))
        return kv if kv and kv[0][0].shape[2] == len(prompt_ids) else None

    def save(self, prompt_ids, kv: list[tuple[torch.Tensor, torch.Tensor]], requests: list[int]) -> None:
        """``requests``: the indices of the requests rooted here (the cache's sweep reads their keys)."""
        tensors = {f"{part}.{i}": t for i, pair in enumerate(kv) for part, t in zip(("keys", "values"), pair)}
        self.store.save(self._name(prompt_ids), 0, tensors, {"keys": sorted({self.keys[i] for i in requests})})

    def remove(self, prompt_ids) -> None:
        self.store.remove(self._name(prompt_ids))


def _rebuilt(segments: list[tuple[dict, dict]], start: DecodeState, config, rows: int):
    """The last segment's state, its cache the starting cache's running rows followed by every segment's columns."""
    meta, tensors = segments[-1]
    running = [int(r) for r in meta["running"]]
    out = [[int(t) for t in row] for row in meta["out"]]
    if len(out) != rows or not running or not set(running) <= set(range(rows)):
        raise ValueError("rows that are not this batch's")
    columns = start.cache.get_seq_length()
    layers: list[tuple[list, list]] = []
    for i, layer in enumerate(start.cache.layers if columns else []):
        layers.append(([layer.keys[running]], [layer.values[running]]))
    for seg_meta, seg in segments:
        first, end = (int(c) for c in seg_meta["columns"])
        if first != columns or end < first:
            raise ValueError("segments that do not follow each other")
        order = [list(seg_meta["running"]).index(r) for r in running]  # a later segment's rows are a subset
        count = sum(name.startswith("keys.") for name in seg)
        if layers and count != len(layers):
            raise ValueError("keys and values of another model")
        for i in range(count):
            if len(layers) <= i:
                layers.append(([], []))
            keys, values = seg[f"keys.{i}"], seg[f"values.{i}"]
            if keys.shape[2] != end - first or values.shape != keys.shape:
                raise ValueError("keys and values of other columns")
            layers[i][0].append(keys[order])
            layers[i][1].append(values[order])
        columns = end
    device = start.inputs.device
    cache = DynamicCache(config=config)
    for i, (keys, values) in enumerate(layers):
        cache.update(torch.cat(keys, dim=-2).to(device), torch.cat(values, dim=-2).to(device), i)
    live = tensors["live"].to(device=device, dtype=torch.bool)
    inputs, positions = tensors["inputs"].to(device), tensors["positions"].to(device)
    attention = tensors["attention"].to(device) if "attention" in tensors else None
    if not (live.shape[0] == inputs.shape[0] == positions.shape[0] == len(running)):
        raise ValueError("a state of other rows")
    states = tensors["generators"]
    if states.shape[0] != rows:
        raise ValueError("generators of another batch")
    state = DecodeState(int(meta["step"]), running, live, out, inputs, positions, attention, cache)
    return state, [s.clone() for s in states]  # set_state takes a tensor of its own, not a row's view
