"""The toy experiment end to end: every LLM's run, then the summaries and the files."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np
import pandas as pd

from cotdyn.methods.infogain import toy
from cotdyn.methods.infogain.experiment.models import _run_job
from cotdyn.methods.infogain.experiment.presets import _seed, resolve_size
from cotdyn.methods.infogain.experiment.summaries import (
    _profiles,
    _samplewise,
    acceptance,
    detection_table,
    table1_frame,
)
from cotdyn.methods.infogain.gain import gain_by_subtask


def toy_experiment(size: str | dict = "reduced", seed: int = 0, n_jobs: int = 1) -> dict[str, Any]:
    """Run the toy experiment and return its summaries (pandas frames) and acceptance checks.

    ``n_jobs`` > 1 runs the five LLMs in separate processes; every LLM is seeded on its own, so
    the results do not depend on ``n_jobs``.
    """
    params = resolve_size(size)
    models = toy.toy_models(params["error_rate"], params["error_values"], params["modulus"])
    x0 = toy.sample_prompts(params["n_problems"], np.random.default_rng(_seed(seed, 0, 0)), params["modulus"])
    splits = toy.split_indices(len(x0), params["split"], np.random.default_rng(_seed(seed, 0, 1)))
    jobs = [(model, x0, splits, params, seed, index) for index, model in enumerate(models, start=1)]
    if n_jobs > 1:
        with ProcessPoolExecutor(max_workers=min(int(n_jobs), len(jobs)), mp_context=get_context("spawn")) as pool:
            runs = list(pool.map(_run_job, jobs))
    else:
        runs = [_run_job(job) for job in jobs]
    ig_rows, orm_rows, ms_rows, det_rows, history, samplewise, subtask, timing = [], [], [], [], [], [], [], []
    for model, run in zip(models, runs):
        a, b, c = _profiles(model.name, run)
        ig_rows += a
        orm_rows += b
        ms_rows += c
        det_rows += detection_table(model.name, run)
        history += [{"llm": model.name, **row} for row in run["history"]]
        frame = _samplewise(model.name, run)
        samplewise.append(frame)
        by_task = gain_by_subtask(
            frame["ig"].to_numpy().reshape(-1, toy.N_STEPS), frame["subtask"].to_numpy().reshape(-1, toy.N_STEPS)
        )
        baselines_by_task = frame.groupby("subtask", sort=True)[["orm_probability", "ms_soft"]].mean().reset_index()
        subtask.append(
            by_task.merge(baselines_by_task, on="subtask").assign(llm=model.name)[
                ["llm", "subtask", "ig", "orm_probability", "ms_soft", "n_steps"]
            ]
        )
        timing.append({"llm": model.name, "seconds": run["seconds"]})
    ig, orm, ms = pd.DataFrame(ig_rows), pd.DataFrame(orm_rows), pd.DataFrame(ms_rows)
    detection = pd.DataFrame(det_rows)
    table1 = table1_frame(detection, models[2].name)
    return {
        "params": params,
        "seed": int(seed),
        "models": [dataclasses.asdict(m) for m in models],
        "split_sizes": {k: int(len(v)) for k, v in splits.items()},
        "ig": ig,
        "orm": orm,
        "ms": ms,
        "detection": detection,
        "table1": table1,
        "subtask": pd.concat(subtask, ignore_index=True),
        "samplewise": pd.concat(samplewise, ignore_index=True),
        "training": pd.DataFrame(history),
        "acceptance": acceptance(ig, orm, ms, table1, models, params["drop_ratio"]),
        "timing": timing,
    }


def run_toy_experiment(size: str | dict, seed: int, out_dir, n_jobs: int = 1) -> dict[str, Any]:
    """``toy_experiment`` and ``write_infogain`` into ``out_dir``; the result gains a ``files`` list."""
    from cotdyn.methods.infogain.report import write_infogain

    result = toy_experiment(size, seed, n_jobs)
    result["files"] = write_infogain(result, out_dir)
    return result
