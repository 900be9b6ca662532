"""Information gain and the ORM on one cell's own traces (seed 000, sections 3.4 and 5), with torch.

The supervisor is a causal LM from the config's ``infogain.traces.supervisor`` entry fine-tuned with
LoRA (``lora.train_lora_supervisor``) on ``question || step 1 || ... || step t #|> gold`` for every
t of every train chain, correct or not, with early stopping on the validation chains. The ORM is the
same causal LM, freshly loaded, with its own LoRA adapters and a one-logit head on the last hidden
state of ``question || step 1 || ... || step t #|>``, labelled with the chain's correctness
(``chain_correct``), trained on the same train chains. Both score the validation and test chains;
``traces`` turns the scores into tables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from cotdyn.methods.infogain.baselines import OrmInstance, collate_orm, orm_instance, orm_loss
from cotdyn.methods.infogain.lora import (
    LoraSettings,
    TextChain,
    _ids,
    _on,
    pad_id,
    score_text_chains,
    train_lora_supervisor,
    with_lora,
)
from cotdyn.methods.infogain.supervisor import TrainParams, deterministic_torch, fit
from cotdyn.methods.infogain.traces import aggregate_table, detection_table, leakage, step_table

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class SupervisorSpec:
    """The config's ``infogain.traces.supervisor`` entry: which causal LM, where, and how to fit it."""

    id: str
    revision: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    lora: LoraSettings = LoraSettings()
    train: TrainParams = TrainParams()
    score_batch_size: int = 16
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_config(cls, entry: dict, seed: int) -> SupervisorSpec:
        entry = dict(entry)
        if "id" not in entry:
            raise KeyError("infogain.traces.supervisor needs 'id' (a local path or hub id of a causal LM)")
        if entry.get("dtype", "float32") not in DTYPES:
            raise ValueError(f"infogain.traces.supervisor.dtype must be one of {sorted(DTYPES)}")
        lora = dict(entry.get("lora", {}))
        if isinstance(lora.get("target_modules"), list):
            lora["target_modules"] = tuple(lora["target_modules"])
        train = dict(entry.get("train", {}), seed=int(seed))
        return cls(
            id=str(entry["id"]),
            revision=entry.get("revision"),
            device=entry.get("device", "cpu"),
            dtype=entry.get("dtype", "float32"),
            lora=LoraSettings(**lora),
            train=TrainParams(**train),
            score_batch_size=int(entry.get("score_batch_size", 16)),
        )


def load_causal_lm(spec: SupervisorSpec):
    """The supervisor's causal LM and tokenizer, at the spec's precision and device."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(spec.id, revision=spec.revision)
    model = AutoModelForCausalLM.from_pretrained(spec.id, revision=spec.revision, dtype=DTYPES[spec.dtype])
    return model.to(spec.device), tokenizer


class TextOrm(torch.nn.Module):
    """A causal LM (LoRA-wrapped) with a linear head on the last position's final hidden state."""

    def __init__(self, lm: torch.nn.Module, hidden_size: int):
        super().__init__()
        self.lm = lm
        self.head = torch.nn.Linear(hidden_size, 1)

    def forward(self, input_ids, attention_mask, position_ids) -> torch.Tensor:
        out = self.lm(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            output_hidden_states=True,
            logits_to_keep=1,
        )
        # left padding: the last position is every row's query token
        return self.head(out.hidden_states[-1][:, -1, :].float()).squeeze(-1)


def text_orm_instances(tokenizer, chain: TextChain, correct: bool, settings: LoraSettings) -> list[OrmInstance]:
    """``question || step 1 || ... || step t #|>`` for t = 0..T, each labelled with the chain's
    correctness; pieces tokenized alone and concatenated, as the supervisor's instances are."""
    prefix = ([tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []) + _ids(tokenizer, chain.prompt)
    query, sep = _ids(tokenizer, settings.answer_separator), _ids(tokenizer, settings.step_separator)
    out = [orm_instance(prefix + query, correct)]
    for step in chain.steps:
        prefix = prefix + sep + _ids(tokenizer, step)
        out.append(orm_instance(prefix + query, correct))
    return out


def train_text_orm(model, tokenizer, train, val, settings: LoraSettings, params: TrainParams) -> tuple[TextOrm, Any]:
    """Fit the ORM on (TextChain, correct) pairs: LoRA adapters and the head are trained."""
    if next(model.parameters()).device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(params.seed)
    orm = TextOrm(with_lora(model, settings), model.config.hidden_size).to(next(model.parameters()).device)
    device, pad = next(orm.parameters()).device, pad_id(tokenizer)
    data = {
        name: [inst for chain, ok in pairs for inst in text_orm_instances(tokenizer, chain, ok, settings)]
        for name, pairs in (("train", train), ("val", val))
    }
    with deterministic_torch(params.seed, params.num_threads):
        result = fit(
            orm, data["train"], data["val"], orm_loss, lambda items: _on(collate_orm(items, pad), device), params
        )
    return orm, result


def orm_scores(orm: TextOrm, tokenizer, chains: Sequence[TextChain], settings: LoraSettings, batch_size: int):
    """Per chain, f_ORM(X_t) for t = 0..T."""
    device, pad = next(orm.parameters()).device, pad_id(tokenizer)
    orm.eval()
    out = []
    with torch.no_grad():
        for chain in chains:
            instances = text_orm_instances(tokenizer, chain, False, settings)
            probs = []
            for i in range(0, len(instances), batch_size):
                batch = _on(collate_orm(instances[i : i + batch_size], pad), device)
                logits = orm(batch["input_ids"], batch["attention_mask"], batch["position_ids"])
                probs.append(torch.sigmoid(logits).double().cpu().numpy())
            out.append(np.concatenate(probs))
    return out


def _text_chain(row) -> TextChain:
    return TextChain(prompt=row.question, steps=tuple(row.steps), gold=row.gold)


def run_cell(chains: pd.DataFrame, split: pd.DataFrame, ms: pd.DataFrame | None, spec: SupervisorSpec) -> dict:
    """Supervisor, ORM and tables for one cell.

    ``chains`` is ``traces.step_chains``'s frame; ``split`` maps problem_id to train / val / test;
    ``ms`` is the cell's Math-Shepherd labels (or None). Chains with no gold answer leave the
    analysis; chains with no step feed the supervisor's t = 0 instance but have no step to score.
    Returns the frames ``steps``, ``aggregate``, ``detection``, ``training`` and a ``summary`` dict;
    with no train or no validation chain, or a split that leaks (``traces.leakage`` over the chains
    fitted and scored and their question texts), nothing is fitted: the frames are empty and the
    summary says why.
    """
    frame = chains.merge(split, on="problem_id", how="left", validate="one_to_one")
    if frame["split"].isna().any():
        raise KeyError(f"problems without a split: {sorted(frame.loc[frame['split'].isna(), 'problem_id'])[:5]}")
    usable = frame[frame["status"] != "no_gold"]
    parts = {name: usable[usable["split"] == name] for name in ("train", "val", "test")}
    summary: dict[str, Any] = {
        "supervisor": spec.id,
        "n_chains": int(len(frame)),
        "status_counts": {k: int(v) for k, v in frame["status"].value_counts().sort_index().items()},
        "split_sizes": {k: int(len(v)) for k, v in parts.items()},
        "chain_accuracy": {k: float(v["chain_correct"].mean()) if len(v) else None for k, v in parts.items()},
    }
    trained_on = sorted(parts["train"]["problem_id"])
    # checked on what is fitted and scored, against the split and the question texts, not the split alone
    summary["leakage"] = leakage(
        split[split["problem_id"].isin(frame["problem_id"])],
        trained_on,
        sorted(pd.concat([parts["val"], parts["test"]])["problem_id"]),
        dict(zip(frame["problem_id"], frame["question"])),
    )
    empty = {
        "steps": step_table(frame.iloc[:0], [], [], None),
        "training": pd.DataFrame(columns=["model", "step", "epoch", "train_loss", "val_loss"]),
    }
    if not summary["leakage"]["ok"] or parts["train"].empty or parts["val"].empty:
        summary["reason"] = (
            "the split leaks: nothing is fitted"
            if not summary["leakage"]["ok"]
            else "no train chain"
            if parts["train"].empty
            else "no validation chain"
        )
        steps = empty["steps"]
        return {**empty, "aggregate": aggregate_table(steps), "detection": detection_table(steps), "summary": summary}

    text = {name: [_text_chain(r) for r in part.itertuples(index=False)] for name, part in parts.items()}
    model, tokenizer = load_causal_lm(spec)
    supervisor, sup_fit = train_lora_supervisor(model, tokenizer, text["train"], text["val"], spec.lora, spec.train)
    orm_model, _ = load_causal_lm(spec)
    correct = {name: part["chain_correct"].tolist() for name, part in parts.items()}
    orm, orm_fit = train_text_orm(
        orm_model,
        tokenizer,
        list(zip(text["train"], correct["train"])),
        list(zip(text["val"], correct["val"])),
        spec.lora,
        spec.train,
    )
    scored = parts["val"].index.tolist() + parts["test"].index.tolist()
    scored_chains = text["val"] + text["test"]
    with deterministic_torch(spec.train.seed, spec.train.num_threads):
        ce = score_text_chains(supervisor, tokenizer, scored_chains, spec.lora, spec.score_batch_size)
        orm_p = orm_scores(orm, tokenizer, scored_chains, spec.lora, spec.score_batch_size)
    steps = step_table(usable.loc[scored], ce, orm_p, ms)
    training = pd.DataFrame(
        [{"model": "supervisor", **row} for row in sup_fit.history]
        + [{"model": "orm", **row} for row in orm_fit.history]
    )
    summary.update(
        reason="",
        supervisor_best_val_loss=float(sup_fit.best_val_loss),
        orm_best_val_loss=float(orm_fit.best_val_loss),
        train_problem_ids=trained_on,
    )
    return {
        "steps": steps,
        "aggregate": aggregate_table(steps),
        "detection": detection_table(steps),
        "training": training,
        "summary": summary,
    }
