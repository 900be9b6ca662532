"""The ORM baseline of seed 000 (section 5, "Baselines"; Havrilla et al., 2024): a classifier
f_ORM(X_t) of P(Y^M = Y | X_t), the probability that the chain's own final answer is correct given its
prefix through step t, trained on the same chains as the supervisor (every prefix t = 0..T of every
chain, labelled with the chain's correctness). Its instances, batches and loss; the model on a study's
traces is ``real.TextOrm``. Math-Shepherd's labels need no torch: ``cotdyn.methods.math_shepherd``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class OrmInstance:
    """A prefix (ending with the ``#|>`` query token) and whether the chain's final answer is correct."""

    input_ids: tuple[int, ...]
    label: int


def orm_instance(prefix_ids: Sequence[int], correct: bool) -> OrmInstance:
    return OrmInstance(tuple(int(i) for i in prefix_ids), int(bool(correct)))


def collate_orm(instances: Sequence[OrmInstance], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded batch with position ids that start at each row's first real token."""
    width = max(len(inst.input_ids) for inst in instances)
    ids = torch.full((len(instances), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(instances), width), dtype=torch.long)
    for row, inst in enumerate(instances):
        n = len(inst.input_ids)
        ids[row, width - n :] = torch.tensor(inst.input_ids)
        mask[row, width - n :] = 1
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": (mask.cumsum(1) - 1).clamp(min=0),
        "labels": torch.tensor([inst.label for inst in instances], dtype=torch.float32),
    }


def orm_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-example binary cross-entropy of the correctness logit."""
    logits = model(batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    return torch.nn.functional.binary_cross_entropy_with_logits(logits, batch["labels"], reduction="none")
