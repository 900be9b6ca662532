"""Math-Shepherd labels read the variant's samples: its m, endpoint and equivalence."""

import pandas as pd
import pytest
from factories import records_frame

from cotdyn.methods.math_shepherd import math_shepherd_from_samples
from cotdyn.records.table import variant_samples


def _samples(answers_by_prefix):
    rows = [
        {"problem_id": "q", "prefix": k, "prefix_tokens": 16 * k, "sample": j, "answer": a,
         "status": "ok" if a else "no_answer"}
        for k, answers in enumerate(answers_by_prefix)
        for j, a in enumerate(answers)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_math_shepherd_honours_the_variants_m_endpoint_and_equivalence():
    samples = _samples([["1", "2", "1", "1"], ["3", "3", "2", "2"]])
    chains = pd.DataFrame({"problem_id": ["q"], "chain_answer": ["2"], "reference_truncated": [False]})
    records = records_frame(problem_id=["q"], gold=["2"])
    full = math_shepherd_from_samples(
        variant_samples(samples, chains, {"m": 4, "endpoint": "reasoning"}), records, "gsm8k"
    )
    assert full["n"].tolist() == [4, 4] and full["soft"].tolist() == [0.25, 0.5]
    # m = 2: the first two samples of each prefix
    two = math_shepherd_from_samples(
        variant_samples(samples, chains, {"m": 2, "endpoint": "reasoning"}), records, "gsm8k"
    )
    assert two["n"].tolist() == [2, 2] and two["soft"].tolist() == [0.5, 0.0]
    # forced endpoint: the last prefix is the chain's own (correct) answer
    forced = math_shepherd_from_samples(
        variant_samples(samples, chains, {"m": 4, "endpoint": "forced"}), records, "gsm8k"
    )
    assert forced["soft"].tolist() == [0.25, 1.0]


def test_math_shepherd_uses_the_variants_equivalence():
    pytest.importorskip("math_verify")
    samples = _samples([["2x+1", "1+2x"]])
    records = records_frame(problem_id=["q"], gold=["2x+1"])
    normalized = math_shepherd_from_samples(samples, records, "math500")
    symbolic = math_shepherd_from_samples(samples, records, "math500", "math_verify")
    assert normalized["soft"].tolist() == [0.5] and symbolic["soft"].tolist() == [1.0]
