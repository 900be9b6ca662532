"""The endpoint and label variants mean what they say (docs/reference.md section 6; seed 003 sections
3.3, 5.2): the chain-answer endpoint fills only the null samples of a finished chain's last prefix,
under ``label: chain`` the final confidence is the agreement with the chain's answer, and a chain
cut by its budget has no answer of its own."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_real_output import _chains, _samples

from cotdyn.grading import answers
from cotdyn.plan.load import effective_protocol, load_plan
from cotdyn.records import table as R

PLAN = load_plan(Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml")


def _last_answers(samples, problem_id):
    last = samples[(samples["problem_id"] == problem_id) & (samples["prefix"] == samples["prefix"].max())]
    return [answers.answer_or_none(a) for a in last.sort_values("sample")["answer"]]


def test_the_chain_endpoint_fills_only_the_null_samples_of_the_last_prefix():
    chains = _chains(["so it is 6", "so it is 6"], "gsm8k")
    # last prefix: p0 answers 5, -, 5, -, 4 (two nulls); p1 answers all five
    pattern = {0: ["5", None, "5", None, "4"], 1: ["5", "5", "4", "4", "3"]}
    samples = _samples(lambda i, k, j: pattern[i][j] if k == 2 else "9", 2)
    out = R.with_chain_endpoint(samples, chains)
    assert _last_answers(out, "p0") == ["5", "6", "5", "6", "4"]
    assert _last_answers(out, "p1") == pattern[1]
    filled = out[(out["problem_id"] == "p0") & (out["prefix"] == 2)]["status"].tolist()
    assert filled == [answers.OK] * 5
    # earlier prefixes are untouched
    assert (out[out["prefix"] < 2]["answer"] == "9").all()


def test_the_chain_endpoint_keeps_the_final_entropy_a_measure_of_spread():
    """Filling every sample made the final entropy 0 for each finished chain (a truncation flag)."""
    protocol = effective_protocol(PLAN) | {"endpoint": "chain_answer"}
    chains = _chains(["so it is 6"], "gsm8k")
    samples = _samples(lambda i, k, j: ["5", "5", "4", "4", "3"][j] if k == 2 else "9", 1)
    records = R.records_table(chains, samples, protocol, PLAN["exclusion"], "gsm8k", "c")
    expected = -(2 * 0.4 * math.log(0.4) + 0.2 * math.log(0.2))
    assert records.loc[0, "final_entropy"] == pytest.approx(expected)


@pytest.mark.parametrize("null_answers", ["drop", "class"])
def test_label_chain_confidence_is_the_agreement_with_the_chains_answer(null_answers):
    protocol = effective_protocol(PLAN) | {"label": "chain", "null_answers": null_answers}
    chains = _chains(["so it is 6", "so it is 6", "no idea at all"], "gsm8k")
    # the majority of the last prefix is 5 (3 of 5); the chain says 6 (1 of 5)
    samples = _samples(lambda i, k, j: ["5", "5", "5", "6", None][j] if k == 2 else "9", 3)
    records = R.records_table(chains, samples, protocol, PLAN["exclusion"], "gsm8k", "c")
    n_classes = 4 if null_answers == "drop" else 5
    assert records.loc[0, "pred"] == "6" and bool(records.loc[0, "correct"])
    assert records.loc[0, "final_confidence"] == pytest.approx(1 / n_classes)
    # a chain with no answer of its own agrees with none of the samples
    assert answers.answer_or_none(records.loc[2, "chain_answer"]) is None
    assert records.loc[2, "final_confidence"] == 0.0
    majority = R.records_table(chains, samples, protocol | {"label": "majority"}, PLAN["exclusion"], "gsm8k", "c")
    assert majority.loc[0, "pred"] == "5" and majority.loc[0, "final_confidence"] == pytest.approx(3 / n_classes)


def test_a_truncated_chain_has_no_chain_answer_in_any_variant():
    chains = _chains(["Step 1: 12 x 4 = 4"], "gsm8k", finish="length")
    samples = _samples(lambda i, k, j: None if k == 2 else "48", 1)
    for label in ("majority", "chain"):
        for endpoint in ("continuation", "chain_answer"):
            protocol = effective_protocol(PLAN) | {"label": label, "endpoint": endpoint}
            records = R.records_table(chains, samples, protocol, PLAN["exclusion"], "gsm8k", "c")
            assert answers.answer_or_none(records.loc[0, "chain_answer"]) is None
            assert not records.loc[0, "chain_correct"]
            assert _last_answers(R.with_chain_endpoint(samples, chains), "p0") == [None] * 5
