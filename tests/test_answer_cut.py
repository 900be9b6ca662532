"""The reasoning cut of seed 002 Def. 1: a chain split before its final-answer statement."""

from __future__ import annotations

import pandas as pd
import pytest

from cotdyn.generation import requests as P
from cotdyn.generation.backends.simulated import ByteTokenizer
from cotdyn.plan.load import effective_protocol, load_plan
from cotdyn.protocol.answer_cut import reasoning_end, reasoning_tokens

TOK = ByteTokenizer()


@pytest.mark.parametrize(
    "text, kind, reasoning",
    [
        # a marker line: the reasoning keeps its newline, the statement starts at the marker
        ("Step 1: 12 + 6 = 18.\nThe final answer is 18.", "gsm8k", "Step 1: 12 + 6 = 18.\n"),
        # a marker on the same line as reasoning: cut at the marker, not the line
        ("12 + 6 = 18, so the answer is 18.", "gsm8k", "12 + 6 = 18, so "),
        ("We add.\n#### 18", "gsm8k", "We add.\n"),
        ("We add 12 and 6.\nAnswer: $18", "arithmetic", "We add 12 and 6.\n"),
        # no marker: the line holding the final number is the statement
        ("We add 12 and 6.\nShe has 18 eggs.", "gsm8k", "We add 12 and 6.\n"),
        # MATH-500: the last box, even after a later number-free sentence
        ("So x = 3.\nThus $x = \\boxed{3}$. Done", "math500", "So x = 3.\nThus $x = "),
        # several markers: the statement starts at the first ("\boxed" is a marker too)
        ("So x = 3.\nThe final answer is \\boxed{3}.", "math500", "So x = 3.\n"),
        ("x is 3. Final answer: the answer is 3", "gsm8k", "x is 3. "),
        # MATH-500 without a box falls back to the final number, as extraction does
        ("So x = 3.\nFinal answer: 3", "math500", "So x = 3.\n"),
        # no answer at all: everything is reasoning
        ("I am not sure how to finish this.", "gsm8k", "I am not sure how to finish this."),
        ("", "gsm8k", ""),
        # the answer on the first line: no reasoning
        ("The final answer is 7.", "gsm8k", ""),
    ],
)
def test_reasoning_end_per_benchmark(text, kind, reasoning):
    assert text[: reasoning_end(text, kind)] == reasoning


def test_reasoning_end_rejects_an_unknown_benchmark():
    with pytest.raises(ValueError, match="unknown benchmark 'no-such-benchmark'"):
        reasoning_end("1", "no-such-benchmark")


def test_reasoning_tokens_end_on_a_character_boundary():
    # 'é' is two bytes: a cut right after it keeps both; the answer's tokens are left out
    text = "Café costs 3.\nThe final answer is 3."
    ids = TOK.encode(text)
    n = reasoning_tokens(ids, TOK.decode, "gsm8k")
    assert TOK.decode(ids[:n]) == "Café costs 3.\n"
    assert n == len("Café costs 3.\n".encode())
    # a chain with no answer of its own (e.g. cut by its budget) is all reasoning
    assert reasoning_tokens(ids, TOK.decode, "gsm8k", answered=False) == len(ids)
    assert reasoning_tokens([], TOK.decode, "gsm8k") == 0


def _chains(texts, answers, truncated):
    return pd.DataFrame(
        {
            "problem_id": [f"q{i}" for i in range(len(texts))],
            "text": texts,
            "token_ids": [TOK.encode(t) for t in texts],
            "chain_answer": answers,
            "reference_truncated": truncated,
        }
    )


def test_prefix_plan_under_the_reasoning_endpoint_ends_at_the_cut():
    protocol = effective_protocol(load_plan("preregistration/plan.yaml")) | {
        "checkpoints": "tokens",
        "checkpoint_stride": 16,
    }
    reasoning = "Step 1: we start from 12 and add 6 to it.\n"  # 42 bytes
    texts = [reasoning + "The final answer is 18.", reasoning + "Step 2: and then"]
    chains = _chains(texts, ["18", None], [False, True])
    full = P.prefix_plan(chains, protocol, TOK.decode)
    cut = P.prefix_plan(chains, protocol | {"endpoint": "reasoning"}, TOK.decode, "gsm8k")
    assert full[full.problem_id == "q0"].prefix_tokens.tolist() == [0, 16, 32, 48, 64, 65]
    assert cut[cut.problem_id == "q0"].prefix_tokens.tolist() == [0, 16, 32, len(reasoning)]
    # the truncated chain has no answer statement: its plan is unchanged
    assert cut[cut.problem_id == "q1"].prefix_tokens.tolist() == full[full.problem_id == "q1"].prefix_tokens.tolist()
    with pytest.raises(ValueError, match="needs the benchmark"):
        P.prefix_plan(chains, protocol | {"endpoint": "reasoning"}, TOK.decode)


@pytest.mark.parametrize("kind, path", [("gsm8k", "gsm8k_test.jsonl"), ("math500", "math500_test.jsonl")])
def test_the_cut_leaves_the_simulated_chains_answer_to_be_sampled(data_dir, kind, path):
    """On the simulated backend the reasoning ends before "The final answer is ..." (on MATH-500
    "... \\boxed{x}"), so the continuation of the last prefix states an answer, the planted one
    (with the cut at the last marker, \\boxed, the MATH-500 continuations were all empty)."""
    from cotdyn.dataset.benchmarks import load_benchmark
    from cotdyn.generation.backends.simulated import SimulatedBackend
    from cotdyn.generation.cache import generate

    problems = load_benchmark({"kind": kind, "path": data_dir / path})[:12]
    protocol = effective_protocol(load_plan("preregistration/plan.yaml")) | {
        "checkpoints": "tokens",
        "endpoint": "reasoning",
        "m": 2,
    }
    backend = SimulatedBackend({p.question: p.gold for p in problems}, kind)
    prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in problems]
    chains_out, _ = generate(backend, P.reference_requests(problems, prompts, protocol, "c"), None)
    chains = P.chains_table(problems, prompts, chains_out, kind)
    plan = P.prefix_plan(chains, protocol, backend.tokenizer.decode, kind)
    last = plan[plan["prefix"] == plan.groupby("problem_id")["prefix"].transform("max")]
    requests = P.continuation_requests(chains, last, protocol, "c")
    samples = P.samples_table(last, requests, generate(backend, requests, None)[0], kind)
    # a chain that states its answer is cut before it, and each continuation of the cut states one,
    # but where the simulator plants a unit with no answer (its "reconsider" text, a latent null);
    # none is empty (a chain cut by its budget states none and is not cut)
    own = chains.set_index("problem_id")["chain_answer"]
    answered = pd.notna(own.reindex(samples["problem_id"]).to_numpy())
    ok = samples["status"][answered] == "ok"
    assert answered.sum() >= 18 and ok.mean() >= 0.9, samples[answered]
    assert samples["text"][answered][~ok].str.contains("reconsider the previous step").all()
    # sample 0 of a prefix states its dominant answer, which the chain states too (no off-mode chains)
    first = samples[samples["sample"] == 0]
    got, want = first["answer"].to_numpy(), own.reindex(first["problem_id"]).to_numpy()
    # a chain cut by its budget states none (it is all reasoning); a planted null unit (above) neither
    stated = pd.notna(want) & pd.notna(got)
    assert stated.sum() >= 9 and (got[stated] == want[stated]).all(), [(g, w) for g, w in zip(got, want) if g != w]
