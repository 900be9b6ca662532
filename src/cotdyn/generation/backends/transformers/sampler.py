"""Sampling with one seeded ``torch.Generator`` per batch row, so a sample never depends on which
other requests shared its batch; the two-level inverse-CDF draw it uses."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from cotdyn.generation.backends.base import Sampling


class SeededSampler:
    """Temperature / top-k / top-p sampling with one seeded generator per batch row.

    Each row draws one uniform from its own generator per step and takes the token where the
    cumulative distribution crosses it: exact sampling, batched over rows.
    """

    def __init__(
        self, seeds: Sequence[int], sampling: Sampling, device: str, on_step: Callable[[int], None] | None = None
    ):
        """``on_step``: called after each decode step with the number of tokens drawn (progress
        within a batch); it sees no token and cannot change a draw."""
        if sampling.repetition_penalty != 1.0:
            raise ValueError("transformers backend: repetition_penalty other than 1.0 is not supported")
        self.sampling = sampling
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
        self.on_step = on_step

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # generate hands each step a fresh scores tensor that nothing else reads: draw from it in
        # place, then overwrite it with the choice (on a CPU, allocating batch x vocabulary
        # tensors costs as much as the arithmetic)
        chosen = self._draw_in_place(scores.float())
        scores.fill_(float("-inf"))[torch.arange(scores.shape[0]), chosen] = 0.0
        return scores

    def draw(self, logits: torch.Tensor) -> torch.Tensor:
        """One token per row by inverse-CDF sampling with that row's generator."""
        return self._draw_in_place(logits.float().clone())

    def draw_rows(self, logits: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """One token for each of ``rows`` (logits row k is sample ``rows[k]``), drawing in place.

        The compacting decode loop hands only the rows still running: each draws from its own
        generator, one uniform a step, exactly as it would inside the full batch.
        """
        return self._draw_in_place(logits.float(), [self.generators[r] for r in rows])

    def _draw_in_place(self, logits: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> torch.Tensor:
        if self.on_step is not None:
            self.on_step(logits.shape[0])
        s = self.sampling
        if s.temperature == 0:
            return torch.argmax(logits, dim=-1)
        logits.div_(s.temperature)
        if s.top_k > 0:
            kth = torch.topk(logits, min(s.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits.masked_fill_(logits < kth, float("-inf"))
        # unnormalized weights: inverse_cdf scales each row's uniform by its total instead
        weights = logits.sub_(logits.max(dim=-1, keepdim=True).values).exp_()
        if s.top_p < 1.0:
            probs = weights / weights.sum(dim=-1, keepdim=True)
            sorted_probs, order = torch.sort(probs, descending=True, dim=-1)
            keep = torch.cumsum(sorted_probs, -1) - sorted_probs < s.top_p
            weights = torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)
        uniforms = torch.cat(
            [
                torch.rand(1, generator=g, dtype=torch.float64, device=weights.device)
                for g in (self.generators if generators is None else generators)
            ]
        )
        return inverse_cdf(weights, uniforms)


CDF_BLOCK = 1024


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Row i's token: the first whose cumulative weight exceeds uniforms[i] times the row's total.

    Done in two levels, cumulative sums over blocks of the vocabulary to find the block and then
    within that block alone, so that no (batch x vocabulary) float64 tensor is made: on a CPU
    that conversion and its cumulative sum cost more than the rest of a sampling step. Block sums
    accumulate in float64 all the same: a GPU splits a float32 reduction differently for
    different batch sizes, and the last-bit differences moved 1 sample in 35 of a random model's.
    """
    rows, vocab = weights.shape
    block = min(CDF_BLOCK, vocab)
    if vocab % block:
        weights = torch.nn.functional.pad(weights, (0, block - vocab % block))
    blocks = weights.view(rows, -1, block)
    block_sums = blocks.sum(-1, dtype=torch.float64)
    block_cdf = block_sums.cumsum(-1)
    target = uniforms * block_cdf[:, -1]
    # rounding can put a target at a row's very end: keep it inside the last block with weight
    chosen = torch.minimum(
        torch.searchsorted(block_cdf, target[:, None], right=True).squeeze(-1), _last_positive(block_sums)
    )
    before = torch.where(chosen > 0, block_cdf.gather(1, (chosen - 1).clamp(min=0)[:, None]).squeeze(-1), 0.0)
    chunk = blocks[torch.arange(rows, device=weights.device), chosen]
    within = torch.searchsorted(chunk.double().cumsum(-1), (target - before)[:, None], right=True).squeeze(-1)
    return chosen * block + torch.minimum(within, _last_positive(chunk))


def _last_positive(values: torch.Tensor) -> torch.Tensor:
    """Index of each row's last positive entry."""
    return values.shape[-1] - 1 - (values > 0).flip(-1).int().argmax(-1)
