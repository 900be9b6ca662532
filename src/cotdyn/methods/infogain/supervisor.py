"""The supervisor model g_sup (seed 000, section 3.4, "The Supervisor Model").

Training instances: for a chain with T steps, instance t (t = 0..T) is
``prompt || step 1 || ... || step t #|> gold answer``; every chain is used, correct or not. The
loss covers the answer tokens only, and a chain's score at step t is the per-token mean
cross-entropy of the gold answer, l_CE(Y, g_sup(X_t)) = -(1/|Y|) sum_i log g(y_i | X_t, #|>, y_<i)
(seed 000, "Estimating Information-Gain in Practice", step 2).

This module is tokenizer-agnostic: it works on token ids. ``toy_vocab`` is the integer-valued
vocabulary of the toy experiment; ``lora.py`` builds the same instances from a pretrained tokenizer.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
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
    answer_scored: Sequence[bool] | None = None,
) -> SupervisorInstance:
    """``prompt || step 1 || ... || step t #|> answer`` with the loss on the answer tokens only.

    ``step_sep`` (the ``||``) precedes each step; ``answer_sep`` (the ``#|>``) precedes the answer.
    Separators, prompt and steps are context, never targets. ``answer_scored`` (default: all) marks
    which answer tokens are targets, for an answer rendered with fixed field labels (the toy's
    ``A1 y1 ... A5 y5``) whose labels are scaffolding rather than answer.
    """
    if not 0 <= t <= len(step_ids):
        raise ValueError(f"t must be in 0..{len(step_ids)} (the number of steps), got {t}")
    scored = [True] * len(answer_ids) if answer_scored is None else [bool(b) for b in answer_scored]
    if len(scored) != len(answer_ids):
        raise ValueError(f"answer_scored has {len(scored)} entries for {len(answer_ids)} answer tokens")
    if not any(scored):
        raise ValueError("no answer token is scored: the supervisor needs at least one target token")
    context = list(prompt_ids)
    for step in step_ids[:t]:
        context += list(step_sep) + list(step)
    context += list(answer_sep)
    input_ids = context + list(answer_ids)
    labels = [IGNORE_INDEX] * len(context) + [int(a) if s else IGNORE_INDEX for a, s in zip(answer_ids, scored)]
    return SupervisorInstance(tuple(int(i) for i in input_ids), tuple(int(i) for i in labels))


def chain_instances(
    prompt_ids: Sequence[int],
    step_ids: Sequence[Sequence[int]],
    answer_ids: Sequence[int],
    step_sep: Sequence[int],
    answer_sep: Sequence[int],
    answer_scored: Sequence[bool] | None = None,
) -> list[SupervisorInstance]:
    """The T+1 instances of one chain, t = 0..T."""
    return [
        build_instance(prompt_ids, step_ids, t, answer_ids, step_sep, answer_sep, answer_scored)
        for t in range(len(step_ids) + 1)
    ]


# ---------------------------------------------------------------------------------------------
# The toy vocabulary: one token per integer value, then the specials.


@dataclass(frozen=True)
class ToyVocab:
    """Integer tokens 0..n_values-1 (token id = value), then PAD, BOS, ``||``, ``#|>`` and one field
    label per answer element (``A1``..``An``).

    The toy answer is rendered ``A1 y1 A2 y2 ...``: the labels are fixed, never scored, and tell a
    small model trained from scratch which element comes next, the way "z =" does in "z = 50".
    """

    n_values: int
    n_fields: int = 5

    @property
    def pad(self) -> int:
        return self.n_values

    @property
    def bos(self) -> int:
        return self.n_values + 1

    @property
    def step_sep(self) -> int:
        return self.n_values + 2

    @property
    def answer_sep(self) -> int:
        return self.n_values + 3

    def field(self, j: int) -> int:
        """The label of answer element j (1-based)."""
        if not 1 <= j <= self.n_fields:
            raise ValueError(f"field index must be in 1..{self.n_fields}, got {j}")
        return self.n_values + 3 + j

    @property
    def size(self) -> int:
        return self.n_values + 4 + self.n_fields

    def decode(self, ids: Sequence[int]) -> str:
        names = {self.pad: "<pad>", self.bos: "<bos>", self.step_sep: "||", self.answer_sep: "#|>"}
        names.update({self.field(j): f"A{j}" for j in range(1, self.n_fields + 1)})
        return " ".join(names.get(int(i), str(int(i))) for i in ids)


def toy_vocab(max_value_exclusive: int, n_fields: int = 5) -> ToyVocab:
    return ToyVocab(int(max_value_exclusive), int(n_fields))


# ---------------------------------------------------------------------------------------------
# Batching, determinism, training and scoring (shared with the LoRA path).


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


def answer_cross_entropy(
    model: torch.nn.Module, instances: Sequence[SupervisorInstance], pad_id: int, batch_size: int = 256
) -> np.ndarray:
    """l_CE(Y, g_sup(X_t)) for each instance, in nats (float64 array, in input order)."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(instances), batch_size):
            batch = pad_batch(instances[start : start + batch_size], pad_id)
            out.append(supervisor_loss(model, batch).double().numpy())
    return np.concatenate(out) if out else np.empty(0)


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


def train_supervisor(
    model: torch.nn.Module,
    train: Sequence[SupervisorInstance],
    val: Sequence[SupervisorInstance],
    pad_id: int,
    params: TrainParams,
) -> TrainResult:
    """Train g_sup on ``prefix #|> gold answer`` instances; early stopping on ``val``."""
    with deterministic_torch(params.seed, params.num_threads):
        return fit(model, list(train), list(val), supervisor_loss, lambda items: pad_batch(items, pad_id), params)


@dataclass(frozen=True)
class ModelSize:
    """A small GPT-2 (the seed's toy supervisor is a GPT-2; we train one from scratch on CPU)."""

    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    n_positions: int = 32


def toy_gpt2_config(vocab: ToyVocab, size: ModelSize):
    """The GPT-2 configuration of the toy supervisor and its ORM (dropout off: early stopping
    regularises). Nothing is generated; BOS/EOS ids lie inside the vocabulary only to keep it valid."""
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=vocab.size,
        n_positions=size.n_positions,
        n_embd=size.n_embd,
        n_layer=size.n_layer,
        n_head=size.n_head,
        activation_function="gelu",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=vocab.bos,
        eos_token_id=vocab.answer_sep,
        pad_token_id=vocab.pad,
    )


def build_gpt2_lm(vocab: ToyVocab, size: ModelSize, seed: int):
    """A randomly initialised GPT2LMHeadModel over ``vocab`` (``toy_gpt2_config``)."""
    from transformers import GPT2LMHeadModel

    config = toy_gpt2_config(vocab, size)
    torch.manual_seed(int(seed))
    return GPT2LMHeadModel(config)
