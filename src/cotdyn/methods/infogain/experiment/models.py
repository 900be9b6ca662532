"""One LLM of the toy experiment: its supervisor, its ORM and Math-Shepherd, scored on every split."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cotdyn.methods.infogain import toy
from cotdyn.methods.infogain.baselines import build_orm, orm_probabilities, train_orm
from cotdyn.methods.infogain.experiment.chains import math_shepherd, orm_instances, supervisor_instances
from cotdyn.methods.infogain.experiment.presets import _seed
from cotdyn.methods.infogain.supervisor import (
    ModelSize,
    TrainParams,
    answer_cross_entropy,
    build_gpt2_lm,
    deterministic_torch,
    toy_vocab,
    train_supervisor,
)


def run_model(
    model: toy.ToyModel, x0: np.ndarray, splits: dict[str, np.ndarray], params: dict, seed: int, index: int
) -> dict[str, Any]:
    """Chains, supervisor, ORM and Math-Shepherd for one synthetic LLM; arrays for val and test.

    Scoring runs under the same fixed thread count as training, so scores are bit-reproducible.
    """
    with deterministic_torch(_seed(seed, index, 5), params["num_threads"]):
        return _run_model(model, x0, splits, params, seed, index)


def _run_model(model, x0, splits, params, seed, index) -> dict[str, Any]:
    vocab = toy_vocab(toy.error_range(params["modulus"])[1])
    size = ModelSize(**params["model"])
    traces = toy.generate_traces(model, x0, np.random.default_rng(_seed(seed, index, 1)))
    parts = {name: traces.subset(idx) for name, idx in splits.items()}
    width = toy.N_STEPS + 1
    out: dict[str, Any] = {"traces": parts, "prompt_index": dict(splits), "history": []}

    started = time.perf_counter()
    sup_params = TrainParams(
        **params["supervisor_train"], seed=_seed(seed, index, 2), num_threads=params["num_threads"]
    )
    supervisor = build_gpt2_lm(vocab, size, sup_params.seed)
    sup_data = {name: supervisor_instances(tr, vocab) for name, tr in parts.items()}
    fitted = train_supervisor(supervisor, sup_data["train"], sup_data["val"], vocab.pad, sup_params)
    out["history"] += [{"model": "supervisor", **row} for row in fitted.history]
    for name in ("val", "test"):
        out[f"ce_{name}"] = answer_cross_entropy(supervisor, sup_data[name], vocab.pad).reshape(-1, width)

    orm_params = TrainParams(**params["orm_train"], seed=_seed(seed, index, 3), num_threads=params["num_threads"])
    orm = build_orm(vocab, size, orm_params.seed)
    orm_data = {name: orm_instances(tr, vocab) for name, tr in parts.items()}
    fitted_orm = train_orm(orm, orm_data["train"], orm_data["val"], vocab.pad, orm_params)
    out["history"] += [{"model": "orm", **row} for row in fitted_orm.history]
    for name in ("val", "test"):
        out[f"orm_{name}"] = orm_probabilities(orm, orm_data[name], vocab.pad).reshape(-1, width)

    ms_rng = np.random.default_rng(_seed(seed, index, 4))
    for name in ("val", "test"):
        out[f"ms_soft_{name}"], out[f"ms_hard_{name}"] = math_shepherd(
            model, parts[name], params["ms_completions"], ms_rng
        )
    out["seconds"] = time.perf_counter() - started
    return out


def _run_job(job: tuple) -> dict[str, Any]:
    return run_model(*job)
