"""Information gain on a study's own traces (seed 000, section 3.4, on pipeline chains): the parts
that need no torch.

- Steps: a reference chain is cut into the registered units (``segment.units`` and ``cap_units``
  under the variant's ``segmentation`` and ``cap``), so step t of the supervisor is unit t of the
  entropy trajectory and X_t is the prefix k = t (docs/reference.md section 4).
- Split: problems, not chains, go to train / validation / test, by a seeded hash of the problem id
  (``split_problems``): the split of a problem depends on the seed and its id only, never on the
  cell, the order of the problems or which other problems exist, so every cell of a benchmark
  shares it and no problem is trained on in one cell and tested in another.
- Detection without step labels: real traces carry no step-level truth, only the chain's outcome.
  A chain is flagged as wrong when its lowest step score (sample-wise gain, ORM probability or
  Math-Shepherd share after the step) is at or below tau; tau maximises accuracy against
  ``chain_correct`` on validation chains only (``gain.select_threshold``), and the test chains are
  scored with it. This is our reading: the seed selects thresholds on held-out data against step
  labels, which real traces lack.
- No method is scored with the label it is judged against: a finished chain's last Math-Shepherd
  step, completed by the chain's own answer (``math_shepherd_from_samples``' ``endpoint``), equals
  ``chain_correct``; MS's chain-level score is the minimum over its other steps only, and a chain
  with no other step has no MS score (it leaves MS's ``n_val`` / ``n_test``).
- Chain length: a minimum over more steps is lower, so detection is partly a length signal. The
  table reports every method within two length strata (``n_steps`` at or below, and above, the
  median over the validation chains, with the threshold chosen on all validation chains), and
  the length alone as a method of its own (``LENGTH``: score -n_steps, so long chains are flagged).
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cotdyn.grading.answers import answer_or_none
from cotdyn.methods.infogain.gain import detection_metrics, select_threshold
from cotdyn.protocol import segment

SPLITS = ("train", "val", "test")
METHODS = ("IG", "ORM", "MS", "LENGTH")


def _unit_interval(seed: int, problem_id: str) -> float:
    """A problem's position in [0, 1): sha256 of the seed and the id, so it is stable everywhere."""
    digest = hashlib.sha256(f"{int(seed)}\x00{problem_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_problems(problem_ids: Sequence[str], fractions: Sequence[float], seed: int) -> pd.DataFrame:
    """``problem_id``, ``split`` (train / val / test): a problem is train when its hash position is
    below the train fraction, val below train + val, test otherwise.

    Columns in input order; duplicate ids are an error (a problem has one split).
    """
    fractions = [float(f) for f in fractions]
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"infogain split must be three non-negative fractions summing to 1, got {fractions}")
    ids = [str(p) for p in problem_ids]
    if len(set(ids)) != len(ids):
        raise ValueError("split_problems: duplicate problem ids")
    cuts = np.cumsum(fractions)[:2]
    position = np.array([_unit_interval(seed, p) for p in ids])
    index = np.searchsorted(cuts, position, side="right")
    return pd.DataFrame({"problem_id": ids, "split": [SPLITS[i] for i in index]})


def _question_key(text) -> str:
    return " ".join(str(text).split()).casefold()


def leakage(
    split: pd.DataFrame,
    trained_on: Sequence[str],
    scored_on: Sequence[str] = (),
    questions: Mapping[str, str] | None = None,
) -> dict:
    """The leakage check, on what was actually fitted and scored: each problem in one split; the
    supervisor and ORM fitted on train problems only (``trained_on``: the ids of the chains fed to
    them); no problem both fitted on and scored (``scored_on``: the ids of the chains scored); and,
    with ``questions`` (problem id -> question text), no question fitted on under one id and scored
    under another (the same text, whitespace and case aside: a benchmark's duplicate, which the
    id-hashed split can put in two splits). ``ok`` is false, with the offending ids, otherwise."""
    per_problem = split.groupby("problem_id")["split"].nunique()
    in_two = sorted(per_problem[per_problem > 1].index)
    train = set(split.loc[split["split"] == "train", "problem_id"])
    trained, scored = set(map(str, trained_on)), set(map(str, scored_on))
    outside = sorted(trained - train)
    both = sorted(trained & scored)
    same_question: list[str] = []
    if questions is not None:
        fitted = {_question_key(questions[p]) for p in trained if p in questions}
        same_question = sorted(p for p in scored - trained if p in questions and _question_key(questions[p]) in fitted)
    return {
        "ok": not (in_two or outside or both or same_question),
        "in_two_splits": in_two,
        "trained_outside_train": outside,
        "trained_and_scored": both,
        "scored_question_trained": same_question,
    }


def step_texts(text: str | None, rule: str, cap: int | None) -> list[str]:
    """The chain's units under the registered rule and cap, as text (unit t is step t)."""
    if rule == "token_window":
        raise ValueError("infogain on traces needs a text segmentation rule; token_window needs the generator's tokens")
    text = text or ""
    return [text[a:b] for a, b in segment.cap_units(segment.units(text, rule), cap)]


def step_chains(chains: pd.DataFrame, problems: pd.DataFrame, rule: str, cap: int | None) -> pd.DataFrame:
    """One row per chain: ``problem_id``, ``question``, ``gold``, ``steps`` (tuple of unit texts),
    ``n_steps``, ``chain_correct`` and ``status``: ``ok``, or ``no_steps`` (an empty chain: no step
    to score, kept for the supervisor's t = 0 instance only) or ``no_gold`` (nothing to score)."""
    for name, frame, needed in (
        ("chains.parquet", chains, ("problem_id", "text", "chain_correct")),
        ("problems parquet", problems, ("problem_id", "question", "gold")),
    ):
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise KeyError(f"{name} lacks column(s) {missing}")
    merged = chains[["problem_id", "text", "chain_correct"]].merge(
        problems[["problem_id", "question", "gold"]], on="problem_id", how="left", validate="one_to_one"
    )
    steps = [tuple(step_texts(t, rule, cap)) for t in merged["text"]]
    gold = [answer_or_none(g) for g in merged["gold"]]
    status = ["no_gold" if g is None else "no_steps" if not s else "ok" for g, s in zip(gold, steps)]
    return pd.DataFrame(
        {
            "problem_id": merged["problem_id"].astype(str),
            "question": merged["question"].fillna("").astype(str),
            "gold": gold,
            "steps": steps,
            "n_steps": [len(s) for s in steps],
            "chain_correct": merged["chain_correct"].fillna(False).astype(bool),
            "status": status,
        }
    )


def step_table(chains: pd.DataFrame, ce: Sequence[np.ndarray], orm: Sequence[np.ndarray], ms: pd.DataFrame | None):
    """One row per (chain, step t = 1..T): CE before and after, sample-wise gain, ORM probability
    after the step and the Math-Shepherd labels of prefix t (NaN where the study drew none), with
    ``ms_endpoint`` true where they are the chain's own answer (``ms``' ``endpoint`` column).

    ``chains`` has ``problem_id``, ``split``, ``chain_correct``; ``ce[i]`` and ``orm[i]`` are chain
    i's values at t = 0..T_i.
    """
    if ms is not None and "endpoint" not in ms.columns:
        ms = ms.assign(endpoint=False)
    ms_index = (
        {}
        if ms is None
        else {
            (p, int(k)): (s, h, bool(e))
            for p, k, s, h, e in ms[["problem_id", "prefix", "soft", "hard", "endpoint"]].itertuples(index=False)
        }
    )
    rows = []
    for chain, c, o in zip(chains.itertuples(index=False), ce, orm):
        for t in range(1, len(c)):
            soft, hard, endpoint = ms_index.get((chain.problem_id, t), (np.nan, np.nan, False))
            rows.append(
                {
                    "problem_id": chain.problem_id,
                    "split": chain.split,
                    "step": t,
                    "n_steps": len(c) - 1,
                    "chain_correct": bool(chain.chain_correct),
                    "ce_before": float(c[t - 1]),
                    "ce_after": float(c[t]),
                    "ig": float(c[t - 1] - c[t]),
                    "orm_probability": float(o[t]),
                    "ms_soft": float(soft),
                    "ms_hard": float(hard),
                    "ms_endpoint": endpoint,
                }
            )
    columns = ["problem_id", "split", "step", "n_steps", "chain_correct", "ce_before", "ce_after", "ig",
               "orm_probability", "ms_soft", "ms_hard", "ms_endpoint"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def aggregate_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Aggregate gain per (split, subset, step): the mean sample-wise gain over the chains that
    have a step t (seed 000 step 4 for chains of different lengths; ``gain.aggregate_gain_ragged``),
    with the mean CE before and after and the number of chains. Subsets: all, correct_answer,
    wrong_answer."""
    rows = []
    for split in ("val", "test"):
        part = steps[(steps["split"] == split).to_numpy(dtype=bool)]
        correct = part["chain_correct"].to_numpy(dtype=bool)
        for subset, chosen in (("all", part), ("correct_answer", part[correct]), ("wrong_answer", part[~correct])):
            for t, group in chosen.groupby("step", sort=True):
                rows.append(
                    {
                        "split": split,
                        "subset": subset,
                        "step": int(t),
                        "ig": float(group["ig"].mean()),
                        "ce_before": float(group["ce_before"].mean()),
                        "ce_after": float(group["ce_after"].mean()),
                        "n_chains": int(len(group)),
                    }
                )
    return pd.DataFrame(rows, columns=["split", "subset", "step", "ig", "ce_before", "ce_after", "n_chains"])


_SCORE = {"IG": "ig", "ORM": "orm_probability", "MS": "ms_soft", "LENGTH": "-n_steps"}
SCORE_RULES = {
    "IG": "min over steps of ig",
    "ORM": "min over steps of orm_probability",
    "MS": "min over steps of ms_soft, the endpoint step (the chain's own answer) left out",
    "LENGTH": "-n_steps (chain length alone)",
}


def _lengths(steps: pd.DataFrame) -> pd.Series:
    """Each chain's number of steps (``n_steps``, or its last step where the frame has no such column)."""
    return steps.groupby("problem_id")["n_steps" if "n_steps" in steps.columns else "step"].max()


def chain_scores(steps: pd.DataFrame, method: str) -> pd.DataFrame:
    """Per chain: its score under ``method`` (low = suspect; ``SCORE_RULES``), ``n_steps`` and
    ``chain_correct``. MS leaves out the steps whose labels are the chain's own answer
    (``ms_endpoint``), so no MS score contains the label it is judged against."""
    lengths = _lengths(steps)
    if method == "LENGTH":
        column = "_minus_length"
        usable = steps.assign(_minus_length=-steps["problem_id"].map(lengths).astype(float))
    else:
        column = _SCORE[method]
        usable = steps.dropna(subset=[column])
    if method == "MS" and "ms_endpoint" in usable.columns:
        usable = usable[~usable["ms_endpoint"].fillna(False).to_numpy(dtype=bool)]
    out = (
        usable.groupby(["split", "problem_id"], sort=True)
        .agg(score=(column, "min"), chain_correct=("chain_correct", "first"))
        .reset_index()
    )
    return out.assign(n_steps=out["problem_id"].map(lengths).astype(int))


DETECTION_COLUMNS = ["method", "score", "stratum", "threshold", "threshold_source", "val_accuracy", "accuracy",
                     "tpr", "fpr", "tp", "fp", "tn", "fn", "n_val", "n_test", "reason"]  # fmt: skip


def detection_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Chain-level detection of a wrong final answer per method: tau from validation chains only,
    accuracy / TPR / FPR on test chains (stratum ``all``), then on the test chains of each length
    stratum with the same tau (``n_steps <= m`` and ``n_steps > m``, m the median ``n_steps`` of
    the validation chains with any step). A method or stratum without validation or test chains
    gets a row with NaN metrics and its ``reason``."""
    steps = (
        steps
        if "n_steps" in steps.columns
        else steps.assign(n_steps=steps.groupby("problem_id")["step"].transform("max"))
    )
    lengths = steps.drop_duplicates("problem_id")
    val_lengths = lengths.loc[lengths["split"] == "val", "n_steps"].to_numpy(dtype=float)
    cut = float(np.median(val_lengths)) if val_lengths.size else None
    strata = [("all", None)]
    if cut is not None:
        m = f"{cut:g}"
        strata += [(f"n_steps <= {m}", lambda n: n <= cut), (f"n_steps > {m}", lambda n: n > cut)]
    rows = []
    for method in METHODS:
        scores = chain_scores(steps, method)
        val, test = (scores[scores["split"] == s] for s in ("val", "test"))
        base = {"method": method, "score": SCORE_RULES[method], "threshold_source": "val", "n_val": len(val)}
        if val.empty or test.empty:
            missing = "validation" if val.empty else "test"
            for stratum, _ in strata:
                rows.append({**base, "stratum": stratum, "n_test": len(test), "threshold": np.nan,
                             "reason": f"no {missing} chain with a step score"})  # fmt: skip
            continue
        tau = select_threshold(val["score"].to_numpy(), ~val["chain_correct"].to_numpy(dtype=bool))
        val_metrics = detection_metrics(val["score"].to_numpy(), ~val["chain_correct"].to_numpy(dtype=bool), tau)
        for stratum, keep in strata:
            part = test if keep is None else test[keep(test["n_steps"].to_numpy(dtype=float))]
            if part.empty:
                rows.append({**base, "stratum": stratum, "n_test": 0, "threshold": tau,
                             "reason": "no test chain in this stratum"})  # fmt: skip
                continue
            metrics = detection_metrics(part["score"].to_numpy(), ~part["chain_correct"].to_numpy(dtype=bool), tau)
            rows.append({**base, **metrics, "stratum": stratum, "n_test": len(part),
                         "val_accuracy": val_metrics["accuracy"], "reason": ""})  # fmt: skip
    table = pd.DataFrame(rows).reindex(columns=DETECTION_COLUMNS)
    counts = ["tp", "fp", "tn", "fn", "n_val", "n_test"]
    table[counts] = table[counts].astype("Int64")  # a row without chains has no counts, not 0.0
    return table
