"""The supervisor for real chains: a pretrained causal LM fine-tuned with LoRA (seed 000, section 3.4;
the arithmetic experiment's Llama-3-8B supervisor). A GPU path.

The instances (``supervisor.chain_instances``) are built from text: ``prompt || step 1 || ... || step t #|> gold`` with the
loss on the gold answer's tokens only. Each piece is tokenized on its own and the ids concatenated
(token-exact, as docs/reference.md section 4 asks), so a prefix is never re-tokenized across a boundary.
The seed reports no LoRA rank, alpha or target modules; ``LoraSettings`` holds ours.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from cotdyn.methods.infogain.supervisor import (
    SupervisorInstance,
    TrainParams,
    chain_instances,
    deterministic_torch,
    fit,
    pad_batch,
    supervisor_loss,
)


@dataclass(frozen=True)
class TextChain:
    """One chain of thought: the prompt, its steps in order, and the gold final answer."""

    prompt: str
    steps: tuple[str, ...]
    gold: str


@dataclass(frozen=True)
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] | str = "all-linear"
    step_separator: str = " || "
    answer_separator: str = " #|> "


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def text_chain_instances(
    tokenizer, chain: TextChain, settings: LoraSettings = LoraSettings()
) -> list[SupervisorInstance]:
    """The T+1 supervisor instances of one text chain (BOS first when the tokenizer has one)."""
    if not chain.gold.strip():
        raise ValueError("TextChain.gold is empty: the supervisor needs a gold answer to score")
    prompt = ([tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []) + _ids(tokenizer, chain.prompt)
    return chain_instances(
        prompt,
        [_ids(tokenizer, s) for s in chain.steps],
        _ids(tokenizer, chain.gold),
        _ids(tokenizer, settings.step_separator),
        _ids(tokenizer, settings.answer_separator),
    )


def pad_id(tokenizer) -> int:
    """The pad id (left padding is masked, so any id works; the tokenizer's pad, else EOS, else 0)."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def with_lora(model: torch.nn.Module, settings: LoraSettings = LoraSettings()):
    """Wrap a causal LM with LoRA adapters; only the adapters are trainable."""
    from peft import LoraConfig, get_peft_model

    targets = settings.target_modules if isinstance(settings.target_modules, str) else list(settings.target_modules)
    config = LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _on(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def train_lora_supervisor(
    model: torch.nn.Module,
    tokenizer,
    train: Sequence[TextChain],
    val: Sequence[TextChain],
    settings: LoraSettings = LoraSettings(),
    params: TrainParams = TrainParams(),
):
    """Fine-tune ``model`` with LoRA on every prefix of every training chain (correct or not), with
    early stopping on the validation chains. Returns (the LoRA-wrapped model, TrainResult)."""
    if _device(model).type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # required by deterministic cuBLAS
    torch.manual_seed(params.seed)  # LoRA's initialisation draws from the global generator
    wrapped = with_lora(model, settings)
    device = _device(wrapped)
    data = {
        name: [inst for chain in chains for inst in text_chain_instances(tokenizer, chain, settings)]
        for name, chains in (("train", train), ("val", val))
    }
    pad = pad_id(tokenizer)
    with deterministic_torch(params.seed, params.num_threads):
        result = fit(
            wrapped,
            data["train"],
            data["val"],
            supervisor_loss,
            lambda items: _on(pad_batch(items, pad), device),
            params,
        )
    return wrapped, result


def score_text_chains(
    model: torch.nn.Module,
    tokenizer,
    chains: Sequence[TextChain],
    settings: LoraSettings = LoraSettings(),
    batch_size: int = 16,
) -> list[np.ndarray]:
    """Per chain, l_CE(Y, g_sup(X_t)) for t = 0..T (chains may differ in T)."""
    pad, device = pad_id(tokenizer), _device(model)
    model.eval()
    out = []
    with torch.no_grad():
        for chain in chains:
            instances = text_chain_instances(tokenizer, chain, settings)
            ce = [
                supervisor_loss(model, _on(pad_batch(instances[i : i + batch_size], pad), device))
                .double()
                .cpu()
                .numpy()
                for i in range(0, len(instances), batch_size)
            ]
            out.append(np.concatenate(ce))
    return out
