"""Property-based tests of the pure protocol (hypothesis, bounded and derandomized for CI).

Real models write anything: no answer, empty text, unicode, a number cut by the budget, two
answers. These properties hold for every such input: prefixes are the chain's own tokens, records
keep one row per problem, and the registered analysis gives a value or a null with its reason.
"""

from __future__ import annotations

import copy
import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from factories import records_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cotdyn.dataset.benchmarks import Problem
from cotdyn.generation import requests as P
from cotdyn.generation.backends.base import Completion, Request, Sampling, request_keys
from cotdyn.generation.backends.simulated import ByteTokenizer
from cotdyn.grading import answers
from cotdyn.plan.load import effective_protocol
from cotdyn.protocol.segment import RULES, segment, units
from cotdyn.records import table as R

PROPERTY = settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Pieces of what models write, joined at random: steps, blank lines, answers in every form.
PIECES = ["Step 1: 12 x 3 = 36.", "\n\n", "\n", " ", "So the answer is 40.", "\\boxed{\\frac{3}{4}}", "$1,200.00",
          "#### 7", "The final answer is 6 or 7.", "12 - 5 = 6", "3.", "-", "٣", "∑ é — ✓", "😀", "\t\n \n", "...",
          "\\boxed{", "0.5", "Step 2:",
          # one value in every form plan v4's canonical rule reads as one class (issue 49)
          "\\boxed{0.50}", "\\boxed{\\frac12}", "$8.50", "8.5", "50\\%", "1/2", "6.00"]  # fmt: skip
chain_texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=14).map("".join)


@pytest.fixture(scope="module")
def smol(smol_tokenizer_dir):
    from transformers import AutoTokenizer

    from cotdyn.protocol.prompts import ChatTokenizer

    return ChatTokenizer(AutoTokenizer.from_pretrained(smol_tokenizer_dir))


def _check_prefixes(text: str, ids: list[int], decode, rule: str, cap: int | None) -> None:
    counts, raw_units = segment(text, ids, decode, rule, cap)
    assert counts[0] == 0 and counts == sorted(counts) and counts[-1] <= len(ids)
    assert raw_units == len(units(text, rule, [len(decode(ids[: t + 1])) for t in range(len(ids))]))
    assert len(counts) == min(raw_units, cap or raw_units) + 1  # prefixes k = 0..K under the cap
    for n in counts:  # each prefix is a run of the chain's own ids and decodes to its own text
        assert text.startswith(decode(ids[:n])), (n, text)


@PROPERTY
@given(text=chain_texts, rule=st.sampled_from(RULES), cap=st.sampled_from([None, 1, 3, 8]))
def test_prefixes_are_the_chains_own_text_under_a_real_tokenizer(smol, text, rule, cap):
    ids = smol.hf.encode(text, add_special_tokens=False)
    _check_prefixes(smol.decode(ids), ids, smol.decode, rule, cap)


@PROPERTY
@given(ids=st.lists(st.integers(0, 49151), max_size=40), rule=st.sampled_from(RULES), cap=st.sampled_from([None, 8]))
def test_prefixes_hold_for_arbitrary_token_ids(smol, ids, rule, cap):
    """Any ids a sampler may draw, split multi-byte characters included; the text is decode(ids)."""
    _check_prefixes(smol.decode(ids), ids, smol.decode, rule, cap)


@PROPERTY
@given(text=chain_texts, rule=st.sampled_from(RULES))
def test_prefixes_hold_for_the_byte_level_tokenizer(text, rule):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    _check_prefixes(tok.decode(ids), ids, tok.decode, rule, 8)


# ---------------------------------------------------------------------------------------------
# Records from any completions

completion_texts = st.one_of(st.just(""), st.sampled_from(PIECES), chain_texts)


@st.composite
def cells(draw):
    """Chains and samples of 1-5 problems with arbitrary completions, after a parquet round trip."""
    n_problems = draw(st.integers(1, 5))
    m = draw(st.integers(1, 6))
    chains, rows = [], []
    for i in range(n_problems):
        chains.append((draw(chain_texts), draw(st.sampled_from(["stop", "length"]))))
        for k in range(draw(st.integers(1, 4))):
            for j in range(m):
                rows.append((f"p{i}", k, draw(completion_texts)))
    return chains, rows, m


def _round_trip(frame: pd.DataFrame) -> pd.DataFrame:
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return pd.read_parquet(io.BytesIO(buffer.getvalue()))


@PROPERTY
@given(
    cell=cells(),
    kind=st.sampled_from(["gsm8k", "math500"]),
    variant=st.sampled_from(
        [{}, {"null_answers": "class"}, {"label": "chain"}, {"endpoint": "chain_answer"}, {"answer_form": "as_written"}]
    ),
)
def test_records_keep_one_row_per_problem_and_never_raise(plan, cell, kind, variant):
    chain_texts_, rows, m = cell
    problems = [Problem(f"p{i}", "q", "6", "6") for i in range(len(chain_texts_))]
    completions = [[Completion((5,) * len(t), t, finish)] for t, finish in chain_texts_]
    chains = _round_trip(P.chains_table(problems, [[1]] * len(problems), completions, kind))
    samples = []
    for pid, k, text in rows:
        found = answers.extract(text, kind)
        samples.append(
            {
                "problem_id": pid,
                "prefix": k,
                "prefix_tokens": k,
                "raw_units": 3,
                "text": text,
                "token_ids": [5],
                "finish_reason": "stop",
                "answer": found.answer,
                "status": found.status,
            }
        )
    samples = pd.DataFrame(samples)
    samples["sample"] = samples.groupby(["problem_id", "prefix"]).cumcount()
    protocol = effective_protocol(plan) | variant | {"m": m}
    records = R.records_table(chains, _round_trip(samples), protocol, plan["exclusion"], kind, f"any-{kind}")
    assert records["problem_id"].tolist() == [p.problem_id for p in problems]
    assert records["excluded"].notna().all() and records["correct"].isin([True, False]).all()
    stated = answers.is_answered(chains["chain_answer"])
    assert (answers.is_answered(records["chain_answer"]) == stated).all()
    assert not (records["chain_correct"] & ~stated).any()  # no answer is never correct
    excluded = records["excluded"].to_numpy(dtype=bool)
    assert records.loc[excluded, "exclusion_reason"].notna().all()
    if protocol["answer_form"] == "canonical":
        # one form per value: a label is correct exactly when its class is the gold's class
        scored = records["pred"].notna()
        assert (records.loc[scored, "correct"] == (records.loc[scored, "pred"] == records.loc[scored, "gold"])).all()


# ---------------------------------------------------------------------------------------------
# The registered analysis on any records frame

BLOCK_ESTIMATES = {"H1": "gap_pp", "H2": "rho", "H3": "rho", "H5": "reduction_pp"}


@st.composite
def records_frames(draw):
    n = draw(st.integers(0, 30))
    cell = draw(st.sampled_from(["qwen7b-gsm8k", "any-model-math500"]))
    bools = st.lists(st.booleans(), min_size=n, max_size=n)
    violations = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), dtype=int)
    return records_frame(
        n, cell=cell,
        n_points=draw(st.lists(st.integers(2, 9), min_size=n, max_size=n)),
        monotone=violations == 0, violations=violations,
        coherence=draw(st.lists(st.sampled_from([0.0, 0.5, 1.1, -0.3]), min_size=n, max_size=n)),
        final_confidence=draw(st.lists(st.sampled_from([0.2, 0.6, 1.0]), min_size=n, max_size=n)),
        correct=draw(bools), excluded=draw(bools),
    )  # fmt: skip


@pytest.fixture(scope="module")
def fast_plan(plan):
    fast = copy.deepcopy(plan)
    fast["analysis"]["bootstrap"]["resamples"] = 50
    return fast


@pytest.mark.slow
@PROPERTY
@given(records=records_frames())
def test_the_registered_analysis_gives_a_value_or_a_reason_for_every_field(fast_plan, records):
    from cotdyn.analysis.hypotheses import analyze, json_ready

    result = analyze(records, fast_plan, "sha")
    json_ready(result)  # no NaN or infinity reaches the output
    for cell in set(records["cell"]):
        block = result["cells"][cell]
        for hid, estimate in BLOCK_ESTIMATES.items():
            defined = block[hid][estimate] is not None and None not in block[hid]["ci"]
            assert defined or block[hid]["reason"], (cell, hid, block[hid])
    for verdict in result["verdicts"].values():
        assert verdict["verdict"] in ("supported", "not_supported", "not_estimable")


# --- request keys (cotdyn.generation.backends.base.request_keys) -----------------------------------

SAMPLINGS = [Sampling(0.7, 512, 0.95, 0, 1.0), Sampling(0.0, 64), Sampling(1.0, 8, 1.0, 40, 1.1)]


def json_key(request: Request, revision: str) -> str:
    """The content address as docs/reference.md defines it, written out: sha256 of the compact JSON list."""
    payload = [revision, list(request.prompt_ids), request.sampling.as_dict(), request.seed, request.n]
    return hashlib.sha256(json.dumps(payload, separators=(",", ":")).encode()).hexdigest()


def test_request_key_is_pinned():
    """A changed key would orphan every cache and seal: its bytes are fixed here."""
    request = Request((1, 22, 333), 4, SAMPLINGS[0], 7)
    assert request.key("sim-rev") == "1b6b936fb84585aec41f336389285f1a1edb1efbced1a9a52c993287fe1a9c76"


@PROPERTY
@given(
    chain=st.lists(st.integers(0, 2**31), max_size=30),
    cuts=st.lists(st.tuples(st.integers(0, 30), st.booleans(), st.integers(0, 2), st.integers(1, 5)), max_size=12),
    revision=st.text(max_size=8),
)
def test_request_keys_equal_the_json_definition(chain, cuts, revision):
    """The carried hash (requests whose ids extend the previous one's) gives every request the key
    of its own JSON: prefixes in order, out of order, repeated, empty, and ids that diverge."""
    requests = [
        Request(tuple(chain[:cut]) + ((99,) if diverge else ()), n, SAMPLINGS[s], seed=cut * 7 + n)
        for cut, diverge, s, n in cuts
    ]
    assert request_keys(requests, revision) == [json_key(r, revision) for r in requests]
