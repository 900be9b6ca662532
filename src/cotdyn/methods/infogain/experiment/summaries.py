"""The toy experiment's summaries: detection tables, profiles, sample-wise scores, acceptance, Table 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cotdyn.methods.infogain import toy
from cotdyn.methods.infogain.experiment.presets import PAPER_TABLE1
from cotdyn.methods.infogain.gain import (
    aggregate_gain,
    change_scores,
    detection_metrics,
    drop_step,
    largest_fall_step,
    samplewise_gain,
    select_threshold,
    step_error_labels,
)

METHODS = (
    # (method, variant, score from a per-split dict of arrays): low score = suspect step
    ("IG", "gain", lambda r, s: samplewise_gain(r[f"ce_{s}"])),
    ("ORM", "probability", lambda r, s: r[f"orm_{s}"][:, 1:]),
    ("ORM", "drop", lambda r, s: change_scores(r[f"orm_{s}"])),
    ("MS", "soft", lambda r, s: r[f"ms_soft_{s}"][:, 1:]),
    ("MS", "hard", lambda r, s: r[f"ms_hard_{s}"][:, 1:]),
    ("MS", "soft_drop", lambda r, s: change_scores(r[f"ms_soft_{s}"])),
)
SUBSETS = ("wrong_answer", "all")
ALL_CHAINS_RATIO = 0.75


def _rows(traces: toy.ToyTraces, subset: str) -> np.ndarray:
    return ~traces.correct if subset == "wrong_answer" else np.ones(len(traces.x0), dtype=bool)


def detection_table(name: str, run: dict) -> list[dict]:
    """Thresholds fitted on val, metrics on test, per method and chain subset."""
    rows = []
    for subset in SUBSETS:
        keep = {s: _rows(run["traces"][s], subset) for s in ("val", "test")}
        labels = {s: step_error_labels(run["traces"][s].error_step, toy.N_STEPS)[keep[s]] for s in keep}
        for method, variant, score in METHODS:
            scores = {s: score(run, s)[keep[s]] for s in keep}
            tau = select_threshold(scores["val"], labels["val"])
            val = detection_metrics(scores["val"], labels["val"], tau)
            test = detection_metrics(scores["test"], labels["test"], tau)
            rows.append(
                {
                    "llm": name,
                    "method": method,
                    "variant": variant,
                    "subset": subset,
                    **{k: test[k] for k in ("threshold", "accuracy", "tpr", "fpr", "tp", "fp", "tn", "fn")},
                    "val_accuracy": val["accuracy"],
                    "threshold_source": "val",
                }
            )
    return rows


def _profiles(name: str, run: dict) -> tuple[list[dict], list[dict], list[dict]]:
    test = run["traces"]["test"]
    wrong = ~test.correct
    ig_rows, orm_rows, ms_rows = [], [], []
    ce = run["ce_test"]
    groups = {"all": np.ones(len(wrong), dtype=bool), "wrong_answer": wrong, "correct_answer": ~wrong}
    for subset, rows in groups.items():
        gain = aggregate_gain(ce, rows)
        ce_mean = ce[rows].mean(axis=0) if rows.any() else np.full(ce.shape[1], np.nan)
        for t in range(1, toy.N_STEPS + 1):
            ig_rows.append(
                {
                    "llm": name,
                    "step": t,
                    "subtask": toy.SUBTASKS[t - 1],
                    "subset": subset,
                    "ig": gain[t - 1],
                    "ce_before": ce_mean[t - 1],
                    "ce_after": ce_mean[t],
                    "n_chains": int(rows.sum()),
                }
            )
        for t in range(toy.N_STEPS + 1):
            orm_rows.append(
                {
                    "llm": name,
                    "step": t,
                    "subset": subset,
                    "orm_probability": _mean(run["orm_test"][rows, t]),
                    "n_chains": int(rows.sum()),
                }
            )
            ms_rows.append(
                {
                    "llm": name,
                    "step": t,
                    "subset": subset,
                    "ms_soft": _mean(run["ms_soft_test"][rows, t]),
                    "ms_hard": _mean(run["ms_hard_test"][rows, t]),
                    "n_chains": int(rows.sum()),
                }
            )
    return ig_rows, orm_rows, ms_rows


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else np.nan


def _samplewise(name: str, run: dict) -> pd.DataFrame:
    test = run["traces"]["test"]
    n = len(test.x0)
    labels = step_error_labels(test.error_step, toy.N_STEPS)
    gain = samplewise_gain(run["ce_test"])
    steps = np.arange(1, toy.N_STEPS + 1)
    return pd.DataFrame(
        {
            "llm": name,
            "prompt": np.repeat(run["prompt_index"]["test"], toy.N_STEPS),
            "step": np.tile(steps, n),
            "subtask": np.tile(np.array(toy.SUBTASKS, dtype=object), n),
            "error_step": np.repeat(test.error_step, toy.N_STEPS),
            "step_wrong": labels.ravel(),
            "final_correct": np.repeat(test.correct, toy.N_STEPS),
            "ce_before": run["ce_test"][:, :-1].ravel(),
            "ce_after": run["ce_test"][:, 1:].ravel(),
            "ig": gain.ravel(),
            "orm_probability": run["orm_test"][:, 1:].ravel(),
            "ms_soft": run["ms_soft_test"][:, 1:].ravel(),
            "ms_hard": run["ms_hard_test"][:, 1:].ravel(),
        }
    )


def acceptance(
    ig: pd.DataFrame,
    orm: pd.DataFrame,
    ms: pd.DataFrame,
    table1: pd.DataFrame,
    models: tuple[toy.ToyModel, ...],
    ratio: float,
) -> dict[str, Any]:
    """The checks of the toy experiment, computed from the summaries (never typed in).

    - IG drop: the first step where wrong-answer chains gain less than ``ratio`` times what
      correct-answer chains gain at the same step equals the LLM's error step.
    - ORM on LLM3: the mean probability over wrong-answer chains falls most at step 2 (the seed:
      "dropping dramatically at step 2 ... rather than at step 3", though LLM3 errs at step 3).
      The falls per step and the margin of step 2's fall over the largest other one are reported
      (``falls``, ``margin``, ``share_by_step_2``: the part of the total fall t = 0..T already
      taken at step 2), so a result that passes or fails narrowly shows as such.
    - MS on LLM3: wrong-answer chains' share of correct completions is flat, i.e. no step stands
      out (range over t = 0..T below 0.05).

    Reported but not checked: the same drop step from IG over all chains, against
    ``ALL_CHAINS_RATIO`` x the correct chains' gain (half the chains err, so the all-chain gain
    after the error is about half the correct-chain gain).
    """
    checks: dict[str, Any] = {"ig_drop_step": {}, "ig_drop_step_all_chains": {}}
    ok = True
    for model in models:
        sel = ig[ig["llm"] == model.name].set_index(["subset", "step"])["ig"]
        wrong, right, every = (sel.loc[s].sort_index().to_numpy() for s in ("wrong_answer", "correct_answer", "all"))
        found = drop_step(wrong, right, ratio)
        checks["ig_drop_step"][model.name] = {"expected": model.error_step, "found": found}
        checks["ig_drop_step_all_chains"][model.name] = {
            "expected": model.error_step,
            "found": drop_step(every, right, ALL_CHAINS_RATIO),
        }
        ok &= found == model.error_step
    llm3 = models[2].name
    orm3 = (
        orm[(orm["llm"] == llm3) & (orm["subset"] == "wrong_answer")].sort_values("step")["orm_probability"].to_numpy()
    )
    ms3 = ms[(ms["llm"] == llm3) & (ms["subset"] == "wrong_answer")].sort_values("step")["ms_soft"].to_numpy()
    checks["llm3_orm_fall_step"] = {"expected": 2, "found": largest_fall_step(orm3), **_fall_margin(orm3, 2)}
    checks["llm3_ms_range"] = {"max_allowed": 0.05, "found": float(np.ptp(ms3)), "profile": ms3.tolist()}
    checks["llm3_table1_threshold_source"] = sorted(set(table1["threshold_source"]))
    ok &= checks["llm3_orm_fall_step"]["found"] == 2
    ok &= checks["llm3_ms_range"]["found"] < 0.05
    ok &= checks["llm3_table1_threshold_source"] == ["val"]
    checks["passed"] = bool(ok)
    return checks


def _fall_margin(levels: np.ndarray, step: int) -> dict[str, Any]:
    """The falls of ``levels`` (t = 0..T) per step, step ``step``'s fall minus the largest other
    one, and the share of the total fall (t = 0 to T) taken by the end of ``step``."""
    falls = levels[:-1] - levels[1:]
    others = np.delete(falls, step - 1)
    total = levels[0] - levels[-1]
    return {
        "profile": levels.tolist(),
        "falls": falls.tolist(),
        "margin": float(falls[step - 1] - others.max()) if len(others) else float(falls[step - 1]),
        f"share_by_step_{step}": float((levels[0] - levels[step]) / total) if total > 0 else float("nan"),
    }


def table1_frame(detection: pd.DataFrame, llm: str) -> pd.DataFrame:
    """Seed 000 Table 1: LLM3, chains with a wrong final answer, measured beside the paper."""
    primary = {"IG": "gain", "ORM": "probability", "MS": "soft"}
    rows = []
    for _, row in detection[(detection["llm"] == llm) & (detection["subset"] == "wrong_answer")].iterrows():
        paper = PAPER_TABLE1.get(row["method"], {}) if primary.get(row["method"]) == row["variant"] else {}
        rows.append(
            {
                "method": row["method"],
                "variant": row["variant"],
                "primary": primary.get(row["method"]) == row["variant"],
                "accuracy": row["accuracy"],
                "tpr": row["tpr"],
                "fpr": row["fpr"],
                "threshold": row["threshold"],
                "threshold_source": row["threshold_source"],
                "paper_accuracy": paper.get("accuracy", np.nan),
                "paper_tpr": paper.get("tpr", np.nan),
                "paper_fpr": paper.get("fpr", np.nan),
            }
        )
    return pd.DataFrame(rows)
