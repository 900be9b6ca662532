"""The protocol end to end on the simulated backend: token-exact prefixes, records, planted truth."""

import math

import pandas as pd
import pytest

from cotdyn.dataset.benchmarks import BenchmarkError, load_benchmark
from cotdyn.generation import requests as P
from cotdyn.generation.backends.simulated import Planted, SimulatedBackend
from cotdyn.generation.cache import generate
from cotdyn.plan.load import effective_protocol
from cotdyn.records import table as R
from cotdyn.records.contract import RECORD_COLUMNS


def run_cell(problems, protocol, plan, benchmark, planted=None):
    backend = SimulatedBackend({p.question: p.gold for p in problems}, benchmark, planted)
    prompts = [backend.tokenizer.chat_prompt_ids(protocol["system_prompt"], p.question) for p in problems]
    chains_out, ref_stats = generate(backend, P.reference_requests(problems, prompts, protocol, "c"), None)
    chains = P.chains_table(problems, prompts, chains_out, benchmark)
    plan_table = P.prefix_plan(chains, protocol, backend.tokenizer.decode)
    requests = P.continuation_requests(chains, plan_table, protocol, "c")
    out, stats = generate(backend, requests, None)
    samples = P.samples_table(plan_table, requests, out, benchmark)
    records = R.records_table(chains, samples, protocol, plan["exclusion"], benchmark, "c")
    return backend, chains, plan_table, requests, samples, records, stats


@pytest.fixture(scope="module")
def gsm8k(data_dir):
    return load_benchmark({"kind": "gsm8k", "path": data_dir / "gsm8k_test.jsonl"})


def test_prefixes_are_token_exact_and_counted_by_the_cap(gsm8k, plan):
    protocol = effective_protocol(plan)
    backend, chains, plan_table, requests, samples, records, stats = run_cell(gsm8k[:120], protocol, plan, "gsm8k")
    assert stats.calls == 1  # every (problem, prefix) request in one batched call
    decode = backend.tokenizer.decode
    for chain in chains.itertuples():
        rows = plan_table[plan_table.problem_id == chain.problem_id]
        assert len(rows) == min(rows.raw_units.iloc[0], protocol["cap"]) + 1
        for n in rows.prefix_tokens:
            assert chain.text.startswith(decode(list(chain.token_ids)[:n]))
    prompt = list(chains.prompt_ids.iloc[0])
    assert list(requests[0].prompt_ids) == prompt  # prefix 0 is the bare chat prompt
    assert prompt.count(backend.tokenizer.bos_token_id) == 1
    assert set(RECORD_COLUMNS) <= set(records.columns)
    assert len(samples) == sum(r.n for r in requests) == protocol["m"] * len(plan_table)
    kept = records[~records.excluded]
    assert all(math.isclose(r.coherence, r.trajectory[0] - r.trajectory[-1]) for r in kept.itertuples())
    assert (records.cap_hit == (records.raw_units >= 8)).all()
    assert (records.n_points == records.trajectory.map(len)).all()


@pytest.mark.slow
def test_planted_accuracy_gap_is_recovered(gsm8k, plan):
    protocol = effective_protocol(plan)
    planted = Planted(monotone_share=0.6, accuracy_monotone=0.85, accuracy_nonmonotone=0.55)
    *_, records, _ = run_cell(gsm8k, protocol, plan, "gsm8k", planted)
    summary = R.cell_summary(records, pd.DataFrame({"status": ["ok"]}))
    kept = records[~records.excluded]
    n1, n0 = kept.monotone.sum(), (~kept.monotone.astype(bool)).sum()
    se = math.sqrt(0.85 * 0.15 / n1 + 0.55 * 0.45 / n0)
    assert abs(summary["gap_pp"] / 100 - 0.30) < 3 * se
    assert summary["n"] == 1319 and 0 < summary["truncation_rate"] < 0.5


def test_same_seeds_same_samples(gsm8k, plan):
    protocol = effective_protocol(plan)
    first = run_cell(gsm8k[:30], protocol, plan, "gsm8k")[4]
    again = run_cell(gsm8k[:30], protocol, plan, "gsm8k")[4]
    pd.testing.assert_frame_equal(first, again)
    reseeded = run_cell(gsm8k[:30], {**protocol, "seed": 1}, plan, "gsm8k")[4]
    assert not reseeded["text"].equals(first["text"])


def test_a_prefix_without_answers_is_recorded_not_dropped(gsm8k, plan):
    protocol = effective_protocol(plan)
    samples = run_cell(gsm8k[:60], protocol, plan, "gsm8k")[4]
    missing = samples[samples.status == "no_answer"]
    assert len(missing) > 0 and missing.answer.isna().all()  # e.g. a finished chain's final prefix


def test_bad_benchmark_files_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 3"}\n{"question": "q2"}\n')
    with pytest.raises(BenchmarkError, match=r"bad.jsonl: line 2 has no field 'answer'"):
        load_benchmark({"kind": "gsm8k", "path": bad})
    good = tmp_path / "good.jsonl"
    good.write_text('{"question": "q", "answer": "#### 3"}\n')
    with pytest.raises(BenchmarkError, match="content sha256 [0-9a-f]{64} differs from the pinned 00"):
        load_benchmark({"kind": "gsm8k", "path": good, "content_sha256": "00" * 32})


def test_pinned_content_hashes_match_the_offline_copies(data_dir, plan):
    for name, file in [("gsm8k", "gsm8k_test.jsonl"), ("math500", "math500_test.jsonl")]:
        spec = plan["panel"]["benchmarks"][name]
        problems = load_benchmark({"kind": name, "path": data_dir / file, "content_sha256": spec["content_sha256"]})
        assert len(problems) == spec["n"]


def test_chain_endpoint_variant_scores_the_chains_own_answer_at_the_last_prefix():
    chains = pd.DataFrame(
        {"problem_id": ["a", "b", "c"], "reference_truncated": [False, True, False], "chain_answer": ["7", "8", None]}
    )
    samples = pd.DataFrame(
        {
            "problem_id": ["a"] * 4 + ["b"] * 2 + ["c"] * 2,
            "prefix": [0, 0, 1, 1, 0, 1, 0, 1],
            "sample": [0, 1] * 4,
            "answer": ["1", "2", None, None, "3", "4", "5", None],
            "status": ["ok", "ok", "no_answer", "no_answer", "ok", "ok", "ok", "no_answer"],
        }
    )
    out = R.with_chain_endpoint(samples, chains)
    assert [a if isinstance(a, str) else None for a in out.answer] == ["1", "2", "7", "7", "3", "4", "5", None]
    assert out.status.tolist()[2:4] == ["ok", "ok"]


def test_the_m_sweep_subsamples_one_draw_of_n_20(gsm8k, plan):
    protocol = effective_protocol(plan)
    *_, samples20, _, _ = run_cell(gsm8k[:40], {**protocol, "m": 20}, plan, "gsm8k")
    _, chains, *_, records5, _ = run_cell(gsm8k[:40], protocol, plan, "gsm8k")
    subsampled = R.records_table(chains, samples20, protocol, plan["exclusion"], "gsm8k", "c", m=5)
    pd.testing.assert_frame_equal(subsampled, records5)  # sample j is seeded seed + j whatever n is
