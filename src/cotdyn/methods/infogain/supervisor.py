"""The supervisor model g_sup (seed 000, section 3.4, "The Supervisor Model").

Training instances: for a chain with T steps, instance t (t = 0..T) is
``prompt || step 1 || ... || step t #|> gold answer``; every chain is used, correct or not. The
loss covers the answer tokens only, and a chain's score at step t is the per-token mean
cross-entropy of the gold answer, l_CE(Y, g_sup(X_t)) = -(1/|Y|) sum_i log g(y_i | X_t, #|>, y_<i)
(seed 000, "Estimating Information-Gain in Practice", step 2).

This module works on token ids; ``lora.py`` builds the instances from a pretrained tokenizer.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch

IGNORE_INDEX = -100  # positions outside the answer: no loss (transformers' convention)


@dataclass(frozen=True)
class SupervisorInstance:
    """One training/scoring instance; ``labels`` equals ``input_ids`` on answer tokens, -100 elsewhere."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]


def build_instance(
    prompt_ids: Sequence[int],
    step_ids: Sequence[Sequence[int]],
    t: int,
    answer_ids: Sequence[int],
    step_sep: Sequence[int],
    answer_sep: Sequence[int],
) -> SupervisorInstance:
    """``prompt || step 1 || ... || step t #|> answer`` with the loss on the answer tokens only.

    ``step_sep`` (the ``||``) precedes each step; ``answer_sep`` (the ``#|>``) precedes the answer.
    Separators, prompt and steps are context, never targets.
    """
    if not 0 <= t <= len(step_ids):
        raise ValueError(f"t must be in 0..{len(step_ids)} (the number of steps), got {t}")
    if not answer_ids:
        raise ValueError("the answer has no token: the supervisor needs at least one target token")
    context = list(prompt_ids)
    for step in step_ids[:t]:
        context += list(step_sep) + list(step)
    context += list(answer_sep)
    input_ids = context + list(answer_ids)
    labels = [IGNORE_INDEX] * len(context) + [int(a) for a in answer_ids]
    return SupervisorInstance(tuple(int(i) for i in input_ids), tuple(int(i) for i in labels))


def chain_instances(
    prompt_ids: Sequence[int],
    step_ids: Sequence[Sequence[int]],
    answer_ids: Sequence[int],
    step_sep: Sequence[int],
    answer_sep: Sequence[int],
) -> list[SupervisorInstance]:
    """The T+1 instances of one chain, t = 0..T."""
    return [build_instance(prompt_ids, step_ids, t, answer_ids, step_sep, answer_sep) for t in range(len(step_ids) + 1)]


# ---------------------------------------------------------------------------------------------
# Batching, determinism and training.


def pad_batch(instances: Sequence[SupervisorInstance], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded ``input_ids``, ``attention_mask``, ``position_ids`` and ``labels`` (pads get -100).

    Left padding puts every answer at the end of its row, so the output head only has to run on the
    last ``logits_to_keep`` positions, and position ids restart at the first real token so a padded
    row is scored exactly like the same row alone.
    """
    width = max(len(inst.input_ids) for inst in instances)
    ids = torch.full((len(instances), width), pad_id, dtype=torch.long)
    labels = torch.full((len(instances), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(instances), width), dtype=torch.long)
    for row, inst in enumerate(instances):
        n = len(inst.input_ids)
        ids[row, width - n :] = torch.tensor(inst.input_ids)
        labels[row, width - n :] = torch.tensor(inst.labels)
        mask[row, width - n :] = 1
    position_ids = (mask.cumsum(dim=1) - 1).clamp(min=0)
    scored = labels != IGNORE_INDEX
    first_scored = torch.where(scored.any(dim=1), scored.float().argmax(dim=1), torch.full((len(instances),), width))
    # the first answer token is predicted at the position before it
    logits_to_keep = int(width - int(first_scored.min()) + 1)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": position_ids,
        "labels": labels,
        "logits_to_keep": min(logits_to_keep, width),
    }


def model_inputs(batch: dict[str, torch.Tensor]) -> dict:
    """The keyword arguments a causal LM's forward takes from a batch."""
    return {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids")}


@contextlib.contextmanager
def deterministic_torch(seed: int, num_threads: int) -> Iterator[None]:
    """Seeded, deterministic torch on CPU with a fixed thread count; restores the previous settings."""
    prev_threads = torch.get_num_threads()
    prev_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(int(num_threads))
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(int(seed))
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev_det)
        torch.set_num_threads(prev_threads)


def per_instance_answer_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-row mean cross-entropy over answer tokens, in nats.

    ``logits`` may cover only the last K positions (``logits_to_keep``); the logit at position p
    predicts the token at p+1, so it is matched with the labels of the last K-1 positions.
    """
    keep = logits.shape[1]
    shift_logits = logits[:, :-1, :].float()
    shift_labels = labels[:, labels.shape[1] - keep + 1 :]
    mask = shift_labels != IGNORE_INDEX
    n_tokens = mask.sum(dim=1)
    if bool((n_tokens == 0).any()) or int(n_tokens.sum()) != int((labels != IGNORE_INDEX).sum()):
        raise ValueError("an instance has answer tokens outside the kept logits, or none at all")
    logp = torch.log_softmax(shift_logits, dim=-1)
    token_ll = logp.gather(-1, shift_labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(token_ll * mask).sum(dim=1) / n_tokens


def supervisor_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-instance mean answer-token cross-entropy: the training objective and the score agree."""
    logits = model(**model_inputs(batch), logits_to_keep=batch["logits_to_keep"]).logits
    return per_instance_answer_ce(logits, batch["labels"])


@dataclass(frozen=True)
class TrainParams:
    """Optimiser and early-stopping settings. The seed gives none ("SFT until convergence with early
    stopping based on held-out validation loss"), so these are ours.

    The held-out loss is checked every ``eval_every`` optimiser steps and at the end of every epoch
    (``eval_every=0``: at epoch ends only); training stops after ``patience`` checks without an
    improvement of ``min_delta``, and the best check's weights are restored.
    """

    max_epochs: int = 30
    batch_size: int = 64
    learning_rate: float = 3e-3
    weight_decay: float = 0.0
    eval_every: int = 0
    patience: int = 4
    min_delta: float = 1e-4
    seed: int = 0
    num_threads: int = 1


@dataclass
class TrainResult:
    best_step: int
    best_val_loss: float
    history: list[dict] = field(default_factory=list)  # per check: step, epoch, train_loss, val_loss


def _mean_loss(loss_fn, model, batches) -> float:
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            values = loss_fn(model, batch)
            total += float(values.sum())
            count += len(values)
    return total / count


def fit(model: torch.nn.Module, train: Sequence, val: Sequence, loss_fn, collate, params: TrainParams) -> TrainResult:
    """Minibatch AdamW with early stopping on the held-out mean loss; the best check's weights are kept.

    ``loss_fn(model, batch)`` returns a per-example loss vector; ``collate(items)`` builds a batch.
    Shuffling uses a generator seeded from ``params.seed``, so training is reproducible on CPU.
    """
    if len(train) == 0 or len(val) == 0:
        raise ValueError(f"fit needs non-empty train and val sets (got {len(train)} and {len(val)})")
    generator = torch.Generator().manual_seed(params.seed)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=params.learning_rate, weight_decay=params.weight_decay
    )
    val_batches = [collate(val[i : i + params.batch_size]) for i in range(0, len(val), params.batch_size)]
    steps_per_epoch = -(-len(train) // params.batch_size)
    eval_every = params.eval_every or steps_per_epoch
    result = TrainResult(best_step=0, best_val_loss=_mean_loss(loss_fn, model, val_batches))
    result.history.append({"step": 0, "epoch": 0, "train_loss": math.nan, "val_loss": result.best_val_loss})
    best_state = copy.deepcopy(model.state_dict())
    step, stale, running, count = 0, 0, 0.0, 0
    for epoch in range(1, params.max_epochs + 1):
        order = torch.randperm(len(train), generator=generator).tolist()
        for start in range(0, len(order), params.batch_size):
            model.train()
            losses = loss_fn(model, collate([train[i] for i in order[start : start + params.batch_size]]))
            optimizer.zero_grad(set_to_none=True)
            losses.mean().backward()
            optimizer.step()
            step += 1
            running, count = running + float(losses.detach().sum()), count + len(losses)
            if step % eval_every and start + params.batch_size < len(order):
                continue
            val_loss = _mean_loss(loss_fn, model, val_batches)
            result.history.append({"step": step, "epoch": epoch, "train_loss": running / count, "val_loss": val_loss})
            running, count = 0.0, 0
            if val_loss < result.best_val_loss - params.min_delta:
                result.best_val_loss, result.best_step, stale = val_loss, step, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                stale += 1
                if stale >= params.patience:
                    model.load_state_dict(best_state)
                    model.eval()
                    return result
    model.load_state_dict(best_state)
    model.eval()
    return result
