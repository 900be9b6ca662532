"""The two annotation-free baselines of seed 000 (section 5, "Baselines").

- ORM (Havrilla et al., 2024): a classifier f_ORM(X_t) of P(Y^M = Y | X_t), the probability that the
  chain's own final answer is correct given its prefix through step t, trained on the same chains
  as the supervisor (every prefix t = 0..T of every chain, labelled with the chain's correctness).
  For the toy it is the supervisor's GPT-2 body with a one-logit head on the last token.
- Math-Shepherd (Wang et al., 2024): from the prefix through step t, N completions by the
  generator itself (the seed's choice: no stronger completer); the soft label is the share that
  reach the gold answer, the hard label is 1 when any does. It needs no torch, so it lives in
  ``cotdyn.methods.math_shepherd`` (the workflow's rule math_shepherd runs in the analysis environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from cotdyn.methods.infogain.supervisor import (
    ModelSize,
    ToyVocab,
    TrainParams,
    TrainResult,
    deterministic_torch,
    fit,
    toy_gpt2_config,
)


@dataclass(frozen=True)
class OrmInstance:
    """A prefix (ending with the ``#|>`` query token) and whether the chain's final answer is correct."""

    input_ids: tuple[int, ...]
    label: int


def orm_instance(prefix_ids: Sequence[int], correct: bool) -> OrmInstance:
    return OrmInstance(tuple(int(i) for i in prefix_ids), int(bool(correct)))


class OrmClassifier(torch.nn.Module):
    """A causal transformer body with a linear head on the final position's hidden state."""

    def __init__(self, body: torch.nn.Module, hidden_size: int):
        super().__init__()
        self.body = body
        self.head = torch.nn.Linear(hidden_size, 1)

    def forward(self, input_ids, attention_mask, position_ids) -> torch.Tensor:
        hidden = self.body(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
        ).last_hidden_state
        return self.head(hidden[:, -1, :]).squeeze(-1)  # left padding: the last position is the final token


def build_orm(vocab: ToyVocab, size: ModelSize, seed: int) -> OrmClassifier:
    """A randomly initialised GPT-2 ORM of the same size as the toy supervisor."""
    from transformers import GPT2Model

    config = toy_gpt2_config(vocab, size)
    torch.manual_seed(int(seed))
    return OrmClassifier(GPT2Model(config), size.n_embd)


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


def orm_loss(model: OrmClassifier, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-example binary cross-entropy of the correctness logit."""
    logits = model(batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    return torch.nn.functional.binary_cross_entropy_with_logits(logits, batch["labels"], reduction="none")


def train_orm(
    model: OrmClassifier, train: Sequence[OrmInstance], val: Sequence[OrmInstance], pad_id: int, params: TrainParams
) -> TrainResult:
    """Fit the ORM with the supervisor's optimiser and held-out early stopping."""
    with deterministic_torch(params.seed, params.num_threads):
        return fit(model, list(train), list(val), orm_loss, lambda items: collate_orm(items, pad_id), params)


def orm_probabilities(
    model: OrmClassifier, instances: Sequence[OrmInstance], pad_id: int, batch_size: int = 512
) -> np.ndarray:
    """f_ORM(X_t) for each instance (float64, input order)."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(instances), batch_size):
            batch = collate_orm(instances[start : start + batch_size], pad_id)
            out.append(
                torch.sigmoid(model(batch["input_ids"], batch["attention_mask"], batch["position_ids"]))
                .double()
                .numpy()
            )
    return np.concatenate(out) if out else np.empty(0)
