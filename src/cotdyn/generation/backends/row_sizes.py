"""Batch sizes at which a model's matrix products give a batch's own rows bit for bit (docs/reference.md section 8).

The compacting decode loop drops finished rows from a batch, but a CPU matrix library picks its
kernel and its split over threads by the matrix sizes: measured on the 2-core development machine,
SmolLM2's MLP down-projection gives other last bits for 56 rows or fewer than for 64, with 2
threads, and every other projection for 15 rows or fewer. So a compacted batch keeps one of a few
sizes (``batch_sizes``), and each linear layer is fed its rows padded with zeros up to the
smallest of those sizes at which it was found to give the full batch's rows (``probe``,
``padded_linears``): every row then goes through the same kernels as in the uncompacted batch.
A row's output depends on its own input row alone, so the padding changes nothing else.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch

# each size a quarter below the one before: few sizes to probe, little padding
SHRINK = 0.75


def batch_sizes(rows: int) -> list[int]:
    """The sizes a batch of ``rows`` may be compacted to, largest (``rows``) first."""
    sizes = [rows]
    while sizes[-1] > 1:
        sizes.append(min(sizes[-1] - 1, math.ceil(sizes[-1] * SHRINK)))
    return sizes


def size_at_least(sizes: list[int], rows: int) -> int:
    """The smallest of ``sizes`` that holds ``rows`` rows."""
    return min(s for s in sizes if s >= rows)


def probe(model: torch.nn.Module, sizes: list[int], seed: int = 0) -> dict[tuple, list[int]]:
    """For each shape of linear layer, the sizes whose products give the rows of ``sizes[0]`` rows.

    One decoding step feeds a linear layer a (rows, 1, in) input. A kernel is chosen by the sizes,
    not the values, so one random input per shape decides it.
    """
    found: dict[tuple, list[int]] = {}
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        key = _shape(module)
        if key in found:
            continue
        weight = module.weight
        x = torch.randn((sizes[0], 1, module.in_features), generator=generator).to(weight.device, weight.dtype)
        with torch.no_grad():
            full = module(x)
            found[key] = [s for s in sizes if torch.equal(module(x[:s]), full[:s])]
    return found


@contextmanager
def padded_linears(model: torch.nn.Module, exact: dict[tuple, list[int]]):
    """Feed each linear layer its input padded with zero rows to the smallest exact size that holds it."""

    def pad(module, args):
        (x,) = args
        rows = size_at_least(exact[_shape(module)], x.shape[0])
        if rows == x.shape[0]:
            return None
        module._cotdyn_rows = x.shape[0]
        return (torch.cat([x, x.new_zeros((rows - x.shape[0], *x.shape[1:]))]),)

    def cut(module, args, output):
        rows = module.__dict__.pop("_cotdyn_rows", None)
        return None if rows is None else output[:rows]

    handles = []
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            handles += [module.register_forward_pre_hook(pad), module.register_forward_hook(cut)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _shape(module: torch.nn.Linear) -> tuple:
    return (module.in_features, module.out_features, module.weight.dtype, module.bias is not None)
