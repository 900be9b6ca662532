"""Records from chains and samples, as pure steps over plain tables (seed 003 sections 2-3).

1. ``variant_samples``: a variant's view of the samples (its m; its endpoint, ``ENDPOINTS``).
2. ``records_table``: one row per problem (docs/reference.md section 11), derived from chains and samples only.
3. ``cell_summary``: the cell's summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cotdyn import stats
from cotdyn.grading import answers
from cotdyn.protocol.signals import derived_columns, study_signals
from cotdyn.protocol.trajectory import agreement, answer_classes, summarize


def _with_endpoint(samples: pd.DataFrame, chains: pd.DataFrame, fill_answered: bool) -> pd.DataFrame:
    answered = answers.is_answered(chains["chain_answer"])
    finished = chains.loc[
        ~chains["reference_truncated"].to_numpy(dtype=bool) & answered, ["problem_id", "chain_answer"]
    ]
    last = samples.groupby("problem_id")["prefix"].transform("max")
    out = samples.merge(finished, on="problem_id", how="left")
    replace = (out["prefix"].to_numpy() == last.to_numpy()) & answers.is_answered(out["chain_answer"])
    if not fill_answered:
        replace &= ~answers.is_answered(out["answer"])
    out.loc[replace, "answer"] = out.loc[replace, "chain_answer"]
    out.loc[replace, "status"] = answers.OK
    return out.drop(columns="chain_answer")


def with_chain_endpoint(samples: pd.DataFrame, chains: pd.DataFrame) -> pd.DataFrame:
    """Samples whose null answers at the final prefix of every finished chain are filled with the
    chain's own answer.

    The final prefix of a finished chain usually continues with nothing (seed 003 section 5.2);
    this endpoint variant scores what the chain itself concluded in place of those empty
    continuations. Samples that did answer keep their answer, so the final entropy still measures
    the spread of the answers (filling all m would make it 0 for every finished chain, a truncation
    flag). Truncated chains and chains without an answer keep their sampled continuations.
    """
    return _with_endpoint(samples, chains, fill_answered=False)


def with_forced_endpoint(samples: pd.DataFrame, chains: pd.DataFrame) -> pd.DataFrame:
    """Samples whose every answer at the final prefix of every finished, answered chain is the chain's
    own answer: seed 002's forced last state (a point mass on what the chain concluded), the named
    alternative to its sampled last state (Def. 1). Truncated and unanswered chains keep their samples."""
    return _with_endpoint(samples, chains, fill_answered=True)


ENDPOINTS = {"chain_answer": with_chain_endpoint, "forced": with_forced_endpoint}


def variant_samples(samples: pd.DataFrame, chains: pd.DataFrame, protocol: dict, m: int | None = None) -> pd.DataFrame:
    """The samples a variant reads: the first m of each prefix, with its endpoint applied.

    ``endpoint: chain_answer`` (seed 003 section 5.2) fills the null answers of the last state with the
    chain's own answer; ``forced`` (seed 002) makes the whole last state the chain's own answer;
    ``continuation`` and ``reasoning`` keep the sampled last state (under ``reasoning`` it was sampled
    from the chain cut before its final-answer statement, seed 002 Def. 1).
    """
    samples = samples[samples["sample"] < (m or protocol["m"])]
    endpoint = ENDPOINTS.get(protocol["endpoint"])
    return endpoint(samples, chains) if endpoint else samples


def with_extraction(
    chains: pd.DataFrame, samples: pd.DataFrame, benchmark: str, extraction: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Chains and samples with their answers re-extracted from their text under ``extraction``.

    samples.parquet and chains.parquet keep the registered rule's answers (the audit re-extracts
    them so); a variant with another rule (``extraction: final_statement``) reads its own here. A
    chain cut by its budget keeps no answer. The rule changes only the number and boxed types.
    """
    if extraction == answers.REGISTERED_EXTRACTION or answers.answer_type(benchmark) not in ("number", "boxed"):
        return chains, samples
    found = [answers.extract(t, benchmark, extraction=extraction) for t in samples["text"]]
    samples = samples.assign(answer=[f.answer for f in found], status=[f.status for f in found])
    own = [
        answers.Extraction(None, answers.TRUNCATED)
        if bool(cut)
        else answers.extract(t, benchmark, extraction=extraction)
        for t, cut in zip(chains["text"], chains["reference_truncated"])
    ]
    chains = chains.assign(chain_answer=[f.answer for f in own], chain_status=[f.status for f in own])
    return chains, samples


def with_answer_form(
    chains: pd.DataFrame, samples: pd.DataFrame, benchmark: str, answer_form: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Chains and samples with their answers as the classes of ``answer_form``.

    The stored answers are ``as_written`` classes (generation and the audit extract so); under
    ``canonical`` (plan v4) each becomes its canonical class (``answers.answer_class``, what a
    re-extraction under that form finds), so the entropy's classes, the label and correctness all
    read one form. A class the form leaves with no answer becomes ``no_answer``."""
    if answer_form == answers.AS_WRITTEN or answers.answer_type(benchmark) not in answers.NUMERIC_TYPES:
        return chains, samples
    mapped = answers.in_answer_form(samples["answer"], benchmark, answer_form)
    lost = np.array([a is None for a in mapped], dtype=bool) & answers.is_answered(samples["answer"])
    samples = samples.assign(answer=mapped, status=samples["status"].mask(lost, answers.NO_ANSWER))
    own = answers.in_answer_form(chains["chain_answer"], benchmark, answer_form)
    lost = np.array([a is None for a in own], dtype=bool) & answers.is_answered(chains["chain_answer"])
    chains = chains.assign(chain_answer=own)
    if "chain_status" in chains.columns:
        chains = chains.assign(chain_status=chains["chain_status"].mask(lost, answers.NO_ANSWER))
    return chains, samples


def _as_written(pred: str | None, texts: list, benchmark: str, extraction: str, answer_form: str) -> str | None:
    """The first spelling of answer class ``pred`` among ``texts`` (what math-verify parses), else
    the class itself."""
    if pred is None:
        return None
    for text in texts:
        found = answers.extract(text, benchmark, extraction=extraction, answer_form=answer_form)
        if found.answer == pred and found.raw is not None:
            return found.raw
    return pred


def records_table(
    chains: pd.DataFrame,
    samples: pd.DataFrame,
    protocol: dict,
    plan_exclusion: dict,
    benchmark: str,
    cell: str,
    m: int | None = None,
    gold_raw: Mapping[str, str] | None = None,
    signals: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per problem: trajectory, shape, magnitude, labels and flags (docs/reference.md section 11).

    ``m`` keeps only the first m samples of each prefix (the m sweep subsamples N = 20 this way).
    ``signals``: the plugin signals the study's config names (``cotdyn.protocol.signals.study_signals``);
    each is a column, beside cotdyn's own.
    ``gold_raw``: each problem's gold as its source writes it (the problems table's ``gold_raw``);
    under ``equivalence: math_verify`` a boxed answer and its gold reach math-verify as written
    (``answers.gold_expression``; the label's first spelling among the samples of its last state,
    else the chain's), not as normalized classes, which math-verify cannot always parse.
    """
    extraction = protocol.get("extraction", answers.REGISTERED_EXTRACTION)
    chains, samples = with_extraction(chains, samples, benchmark, extraction)
    # plans v1-v3 do not name answer_form: their effective protocol says as_written (plan.load)
    answer_form = protocol.get("answer_form", answers.AS_WRITTEN)
    chains, samples = with_answer_form(chains, samples, benchmark, answer_form)
    samples = variant_samples(samples, chains, protocol, m)
    as_written = protocol["equivalence"] == "math_verify" and answers.answer_type(benchmark) == "boxed"
    grouped = problem_samples(samples)
    computed = study_signals(signals)
    rows = []
    for chain in chains.itertuples():
        group = grouped.get(chain.problem_id)
        prefix_answers = group.prefix_answers if group is not None else []
        t = summarize(
            prefix_answers, protocol["epsilon"], protocol["null_answers"], plan_exclusion["min_answer_bearing_prefixes"]
        )
        chain_answer = answers.answer_or_none(chain.chain_answer)
        pred, confidence = t.pred, t.final_confidence
        if protocol["label"] == "chain":
            # the confidence is the final answers' agreement with the label actually scored
            pred = chain_answer
            last = answer_classes(prefix_answers[t.points[-1]], protocol["null_answers"]) if t.points else []
            confidence = agreement(last, pred)
        # the gold's class under the protocol's form (the problems table stores the as_written class)
        gold_class = (
            chain.gold
            if answer_form == answers.AS_WRITTEN
            else answers.answer_class(chain.gold, benchmark, answer_form)
        )
        gold, pred_scored, chain_scored = gold_class, pred, chain_answer
        if as_written:
            # the samples of the last answer-bearing prefix, in sample order
            texts = group.texts[t.points[-1]] if t.points and group is not None else []
            pred_scored = _as_written(pred, [*texts, chain.text], benchmark, extraction, answer_form)
            chain_scored = _as_written(chain_answer, [chain.text], benchmark, extraction, answer_form)
            gold = answers.gold_expression((gold_raw or {}).get(chain.problem_id), benchmark) or chain.gold
        raw_units, n_answered, n_cut = (
            (group.raw_units, group.n_answered, group.n_cut) if group is not None else (0, 0, 0)
        )
        rows.append(
            {
                "cell": cell,
                "problem_id": chain.problem_id,
                "trajectory": t.trajectory,
                "points": t.points,
                "n_points": len(t.trajectory),
                "n_prefixes": len(prefix_answers),
                "monotone": t.monotone,
                "violations": t.violations,
                "coherence": t.coherence,
                "final_entropy": t.final_entropy,
                "final_confidence": confidence,
                "pred": pred,
                "gold": gold_class,
                "correct": answers.equivalent(pred_scored, gold, benchmark, protocol["equivalence"], None, answer_form),
                "chain_answer": chain_answer,
                "chain_correct": answers.equivalent(
                    chain_scored, gold, benchmark, protocol["equivalence"], None, answer_form
                ),
                "excluded": t.excluded,
                "exclusion_reason": t.exclusion_reason,
                "reference_tokens": int(chain.reference_tokens),
                "reference_truncated": bool(chain.reference_truncated),
                "raw_units": raw_units,
                "cap_hit": protocol["cap"] is not None
                and protocol["checkpoints"] == "steps"
                and raw_units >= protocol["cap"],
                "parse_rate": n_answered / group.n if group is not None else float("nan"),
                # the share of the problem's answers that came from continuations cut by their budget
                "cut_answer_share": n_cut / n_answered if n_answered else float("nan"),
                "endpoint_answered": bool(prefix_answers and any(a is not None for a in prefix_answers[-1])),
                **derived_columns(t, prefix_answers, computed),
            }
        )
    records = pd.DataFrame(rows)
    records["monotone"] = records["monotone"].astype("boolean")
    records["violations"] = records["violations"].astype("Int64")
    return records


def hit_budget(samples: pd.DataFrame) -> pd.Series:
    """Whether each sample's continuation stopped at its token budget (``hit_budget``; a samples file
    written before that column existed says it by its finish reason)."""
    if "hit_budget" in samples.columns:
        return samples["hit_budget"].astype(bool)
    return samples["finish_reason"] == "length"


def without_cut_answers(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples with every answer of a continuation cut by its budget made no answer: the
    sensitivity variant ``cut_answers: no_answer`` (its last number may be an intermediate value)."""
    out = samples.copy()
    cut = hit_budget(out).to_numpy()
    out["answer"] = out["answer"].astype(object)
    out.loc[cut, "answer"] = None
    out.loc[cut, "status"] = answers.NO_ANSWER
    return out


@dataclass(frozen=True)
class ProblemSamples:
    """One problem's samples as its record reads them."""

    prefix_answers: list[list[str | None]]  # per prefix, ascending, the answers in sample order
    texts: list[list]  # the same rows' texts
    raw_units: int  # of its first row as stored
    n: int  # rows
    n_answered: int  # rows whose status is ok
    n_cut: int  # of those, the ones cut by their budget


def problem_samples(samples: pd.DataFrame) -> dict[str, ProblemSamples]:
    """Each problem's samples, found by one stable sort of the whole table (problem, prefix,
    sample) instead of a pandas group, sort and comparison per problem, which cost most of the
    records rule's time on a panel-sized study. Rows of a prefix keep their stored order where
    their sample numbers tie, as a stable sort of each problem's rows would."""
    codes, problems = pd.factorize(samples["problem_id"], sort=False)  # a missing id: -1, no group
    if not len(problems):
        return {}
    prefix, sample = samples["prefix"].to_numpy(), samples["sample"].to_numpy()
    order = np.lexsort((sample, prefix, codes))
    order = order[codes[order] >= 0]
    ok = (samples["status"] == answers.OK).to_numpy(dtype=bool, na_value=False)
    cut = ok & hit_budget(samples).to_numpy(dtype=bool)
    kept = codes[codes >= 0]
    n = np.bincount(kept, minlength=len(problems))
    n_answered = np.bincount(kept, weights=ok[codes >= 0], minlength=len(problems)).astype(np.int64)
    n_cut = np.bincount(kept, weights=cut[codes >= 0], minlength=len(problems)).astype(np.int64)
    _, first = np.unique(codes, return_index=True)  # each problem's first stored row
    first = first[codes[first] >= 0]
    raw_units = samples["raw_units"].to_numpy()[first]
    stored_answers = answers.answers_or_none(samples["answer"].to_numpy()[order])
    stored_texts = samples["text"].to_numpy()[order].tolist()
    sorted_codes, sorted_prefix = codes[order], prefix[order]
    starts = np.flatnonzero(
        np.r_[True, (sorted_codes[1:] != sorted_codes[:-1]) | (sorted_prefix[1:] != sorted_prefix[:-1])]
    )
    ends = np.r_[starts[1:], len(order)]
    per_prefix: dict[int, tuple[list, list]] = {}
    for start, end, code in zip(starts.tolist(), ends.tolist(), sorted_codes[starts].tolist()):
        found, texts = per_prefix.setdefault(code, ([], []))
        found.append(stored_answers[start:end])
        texts.append(stored_texts[start:end])
    return {
        problems[code]: ProblemSamples(
            found, texts, int(raw_units[code]), int(n[code]), int(n_answered[code]), int(n_cut[code])
        )
        for code, (found, texts) in per_prefix.items()
    }


def cell_summary(records: pd.DataFrame, samples: pd.DataFrame, min_group_size: int | None = None) -> dict:
    """The per-cell summary: n, exclusions, accuracy, coverage, points, truncation, cap, parse rate.

    ``gap_pp`` is H1's (``stats.gap_pp``, under the plan's ``analysis.groups.min_group_size``): null
    with the same ``gap_pp_reason`` wherever hypotheses.json leaves it null."""
    kept = records[~records["excluded"].astype(bool)]
    monotone = kept["monotone"].astype(bool).to_numpy()
    gap, gap_reason = stats.gap_pp(
        monotone, kept["correct"].astype(bool).to_numpy(), min_group_size, int(records["excluded"].sum())
    )

    def rate(values) -> float | None:
        return float(np.mean(values)) if len(values) else None

    # the accuracy of each group as H1 defines it (stats.group_accuracy_rows); NaN for an empty group
    acc_in, acc_out = stats.group_accuracy_rows(
        monotone, kept["correct"].astype(bool).to_numpy(), stats.full_sample(len(kept))
    )
    acc_mono = float(acc_in[0]) if monotone.any() else None
    acc_non = float(acc_out[0]) if (~monotone).any() else None
    return {
        "n": int(len(records)),
        "n_excluded": int(records["excluded"].sum()),
        "n_analyzed": int(len(kept)),
        "accuracy": rate(kept["correct"]),
        "monotone_coverage": rate(monotone),
        "accuracy_monotone": acc_mono,
        "accuracy_nonmonotone": acc_non,
        "gap_pp": gap,
        "gap_pp_reason": gap_reason,
        "median_points": float(np.median(kept["n_points"])) if len(kept) else None,
        "truncation_rate": rate(records["reference_truncated"]),
        "cap_hit_rate": rate(records["cap_hit"]),
        "parse_rate": rate(samples["status"] == answers.OK),
        # the share of all answers that came from continuations cut by their budget
        "cut_answer_rate": rate(hit_budget(samples)[samples["status"] == answers.OK])
        if {"hit_budget", "finish_reason"} & set(samples.columns)
        else None,
        "endpoint_answered_rate": rate(records["endpoint_answered"]),
        "chain_accuracy": rate(records["chain_correct"]),
    }
