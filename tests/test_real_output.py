"""What real models write: chains without an answer beside chains with one, empty and odd text,
and cells where nothing is analysable. Every such output is recorded, never dropped, never a crash.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from cotdyn.dataset.benchmarks import Problem
from cotdyn.generation import requests as P
from cotdyn.generation.backends.base import Completion
from cotdyn.grading import answers
from cotdyn.plan.load import effective_protocol
from cotdyn.records import table as R


def parquet_round_trip(frame: pd.DataFrame) -> pd.DataFrame:
    """What every downstream rule reads: a missing string comes back as NaN."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return pd.read_parquet(io.BytesIO(buffer.getvalue()))


@pytest.mark.parametrize("value, expected", [
    (None, None), (float("nan"), None), (np.nan, None), (pd.NA, None), (pd.NaT, None), (np.float32("nan"), None),
    ("", None), ("  \n", None), ("6", "6"), (" 6 ", " 6 "), ("\\frac{1}{2}", "\\frac{1}{2}"), ("é", "é"),
    (6, "6"), (np.int64(-3), "-3"), (6.5, "6.5"),
])  # fmt: skip
def test_one_definition_of_a_missing_answer(value, expected):
    assert answers.answer_or_none(value) == expected


@pytest.mark.parametrize("value", [True, np.bool_(False), ["6"], {"a": 1}])
def test_an_answer_that_is_not_text_is_an_error_naming_its_type(value):
    with pytest.raises(TypeError, match=type(value).__name__):
        answers.answer_or_none(value)


@pytest.mark.parametrize("kind", ["gsm8k", "math500", "arithmetic"])
@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA, ""])
def test_a_missing_answer_is_never_equivalent_and_never_raises(kind, missing):
    assert answers.equivalent(missing, "6", kind) is False
    assert answers.equivalent("6", missing, kind) is False
    assert answers.normalize(missing, kind) is None
    assert answers.extract(missing, kind) == answers.Extraction(None, answers.NO_ANSWER)


def _chains(texts: list[str], benchmark: str, finish: str = "stop") -> pd.DataFrame:
    problems = [Problem(f"p{i}", "q", "6", "6") for i in range(len(texts))]
    completions = [[Completion((5, 6, 7), text, finish)] for text in texts]
    return parquet_round_trip(P.chains_table(problems, [[1]] * len(texts), completions, benchmark))


def _samples(answer_of, n_problems: int, n_prefixes: int = 3, m: int = 5) -> pd.DataFrame:
    rows = []
    for i in range(n_problems):
        for k in range(n_prefixes):
            for j in range(m):
                a = answer_of(i, k, j)
                rows.append(
                    {
                        "problem_id": f"p{i}",
                        "prefix": k,
                        "prefix_tokens": 2 * k,
                        "raw_units": n_prefixes - 1,
                        "sample": j,
                        "seed": j,
                        "text": a or "",
                        "token_ids": [5],
                        "finish_reason": "stop",
                        "answer": a,
                        "status": answers.OK if a else answers.NO_ANSWER,
                    }
                )
    return parquet_round_trip(pd.DataFrame(rows))


@pytest.mark.parametrize("kind", ["gsm8k", "math500"])
def test_records_of_a_chain_without_an_answer_beside_one_with_an_answer(plan, kind):
    """The issue's reproduction: this crashed a full MATH-500 cell and a 128-problem GSM8K cell."""
    chains = _chains(["so it is 6", "I am not sure"], kind)
    assert chains["chain_answer"].isna().tolist() == [False, True]
    records = R.records_table(
        chains, _samples(lambda i, k, j: "6", 2), effective_protocol(plan), plan["exclusion"], kind, "weak-" + kind
    )
    records = parquet_round_trip(records)
    assert records["chain_answer"].isna().tolist() == [False, True]
    assert records["chain_correct"].tolist() == [True, False]
    assert len(records) == 2


@pytest.mark.parametrize("label", ["majority", "chain"])
@pytest.mark.parametrize("endpoint", ["continuation", "chain_answer"])
def test_every_protocol_variant_reads_missing_chain_answers(plan, label, endpoint):
    protocol = effective_protocol(plan) | {"label": label, "endpoint": endpoint}
    chains = _chains(["so it is 6", "", "maybe 7"], "gsm8k")
    samples = _samples(lambda i, k, j: None if i == 1 or (k + j) % 2 else str(6 + i), 3)
    records = R.records_table(chains, samples, protocol, plan["exclusion"], "gsm8k", "weak-gsm8k")
    assert records["problem_id"].tolist() == ["p0", "p1", "p2"]
    assert bool(records.loc[1, "excluded"]) and records.loc[1, "exclusion_reason"]
    if label == "chain":
        assert records["correct"].tolist() == [True, False, False]


def test_the_chain_endpoint_fills_only_from_a_stated_chain_answer():
    chains = _chains(["so it is 6", "no idea"], "gsm8k")
    samples = _samples(lambda i, k, j: None, 2)
    out = R.with_chain_endpoint(samples, chains)
    last = out[out["prefix"] == 2]
    assert last.loc[last["problem_id"] == "p0", "answer"].tolist() == ["6"] * 5
    assert last.loc[last["problem_id"] == "p1", "answer"].isna().all()
    assert len(out) == len(samples)


def test_summaries_dynamics_and_math_shepherd_read_missing_answers(plan):
    from cotdyn.analysis.exploratory import label_coupling
    from cotdyn.methods.dynamics import distributions
    from cotdyn.methods.math_shepherd import math_shepherd_from_samples

    chains = _chains(["so it is 6", "no idea", "7"], "gsm8k")
    samples = _samples(lambda i, k, j: None if (i + j) % 3 == 0 else str(6 + (j % 2)), 3)
    records = parquet_round_trip(
        R.records_table(chains, samples, effective_protocol(plan), plan["exclusion"], "gsm8k", "weak-gsm8k")
    )
    summary = R.cell_summary(records, samples)
    assert summary["n"] == 3 and 0 < summary["parse_rate"] < 1
    states = distributions(samples)
    assert all(math.isclose(sum(s.values()), 1.0) for trace in states.values() for s in trace)
    assert label_coupling(records)["n"] == int((~records["excluded"]).sum())
    shepherd = math_shepherd_from_samples(samples, records, "gsm8k")
    assert len(shepherd) == 9 and shepherd["soft"].between(0, 1).all()
    # the endpoint: each chain's last prefix is completed by the chain ("6" reaches gold; none, "7" do not)
    ends = math_shepherd_from_samples(samples, records, "gsm8k", chains=chains).query("prefix == 2")
    assert ends["soft"].tolist() == [1.0, 0.0, 0.0] and ends["endpoint"].all()


@pytest.mark.slow
def test_the_command_line_takes_null_and_numeric_answers():
    import subprocess
    import sys

    pairs = [{"a": None, "b": "6"}, {"a": 6, "b": "6.0"}, {"a": "", "b": ""}]
    run = subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", "equivalent", "--benchmark", "gsm8k"],
        input="\n".join(json.dumps(p) for p in pairs),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert [json.loads(x)["equivalent"] for x in run.stdout.splitlines()] == [False, True, False]
    run = subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", "extract", "--benchmark", "gsm8k"],
        input='{"text": true}\n',
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "stdin line 1: field 'text'" in run.stderr


# ---------------------------------------------------------------------------------------------
# Degenerate cells: every writer finishes, and says why a value is null


def _degenerate(plan, texts, answer_of):
    chains = _chains(texts, "gsm8k")
    samples = _samples(answer_of, len(texts))
    records = parquet_round_trip(
        R.records_table(chains, samples, effective_protocol(plan), plan["exclusion"], "gsm8k", "weak-gsm8k")
    )
    return chains, samples, records


DEGENERATE = {
    "every chain excluded": (["I am not sure"] * 4, lambda i, k, j: None),
    "a single problem": (["so 6"], lambda i, k, j: "6"),
    "one group empty, constant label": (["so 6"] * 5, lambda i, k, j: "6"),
    "constant wrong label": (["so 7", "?"] * 3, lambda i, k, j: str(7 + (i + k + j) % 3)),
}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_a_degenerate_cell_runs_through_every_writer(plan, case, tmp_path):
    from cotdyn.analysis.hypotheses import analyze, write_analysis
    from cotdyn.methods.math_shepherd import math_shepherd_from_samples
    from cotdyn.report.dynamics_plots import write_dynamics
    from cotdyn.report.exploratory_tables import TABLES, write_exploratory

    chains, samples, records = _degenerate(plan, *DEGENERATE[case])
    result = analyze(records, plan, "sha")
    written = write_analysis(result, records, tmp_path / "analysis")
    cell = result["cells"]["weak-gsm8k"]
    assert cell["role"] == "descriptive"
    for block in ("H1", "H2", "H3", "H5"):  # a null estimate always carries its reason
        estimate = {"H1": "gap_pp", "H2": "rho", "H3": "rho", "H5": "reduction_pp"}[block]
        assert cell[block][estimate] is not None or cell[block]["reason"], (block, cell[block])
    assert all(p.stat().st_size > 0 for p in written)
    paths = write_exploratory(records, tmp_path / "exploratory", m=5, epsilon=0.01, seed=1, resamples=50, level=0.95)
    assert {p.name for p in paths} >= {f"{t}.csv" for t in TABLES} | {"example_trajectories.png"}
    for name in TABLES:
        if name == "coverage_curves":
            continue
        table = pd.read_csv(tmp_path / "exploratory" / f"{name}.csv")
        assert (table["cell"] == "weak-gsm8k").any(), name  # a row for the cell, even when nothing is estimable
        values = table.drop(columns=["cell", "reason"])
        unexplained = values.isna().any(axis=1) & table["reason"].isna()
        assert not unexplained.any(), (name, table[unexplained])
    endpoint = R.with_chain_endpoint(samples, chains).assign(cell="weak-gsm8k")
    names = {p.name for p in write_dynamics(endpoint, records, tmp_path / "dynamics")}
    assert {"profiles.csv", "trajectories.png", "mechanism_shares.png", "disagreement.png"} <= names
    assert len(math_shepherd_from_samples(samples, records, "gsm8k")) == len(samples.groupby(["problem_id", "prefix"]))


def test_every_chain_excluded_is_reported_as_such(plan):
    from cotdyn.analysis.hypotheses import analyze
    from cotdyn.report.exploratory_tables import exploratory_tables

    _, _, records = _degenerate(plan, *DEGENERATE["every chain excluded"])
    assert records["excluded"].all() and len(records) == 4
    h1 = analyze(records, plan, "sha")["cells"]["weak-gsm8k"]["H1"]
    assert h1["gap_pp"] is None and h1["reason"] == "no usable problems (4 of 4 excluded)"
    tables = exploratory_tables(records, m=5, epsilon=0.01, seed=1, resamples=50)
    assert tables["early_exit"]["reason"].tolist() == ["no analyzed chains (4 of 4 excluded)"]


def test_a_figure_with_nothing_to_draw_says_so_in_its_title(plan):
    from cotdyn.report.figures import nothing_to_draw, trajectory_figure

    _, _, records = _degenerate(plan, *DEGENERATE["every chain excluded"])
    titles = [ax.get_title() for ax in trajectory_figure(records).axes]
    assert titles == ["weak-gsm8k: nothing to draw"]
    assert nothing_to_draw("Mechanism shares", "no trace").axes[0].get_title() == "Mechanism shares: nothing to draw"


def test_a_constant_label_gives_no_accuracy_gap(plan):
    """Every usable chain wrong: the gap is 0 by construction, so H1 is null with the reason and
    never a zero-width CI (the embedded default's 135M model gets every problem wrong)."""
    from cotdyn.analysis.hypotheses import analyze

    # odd problems' answers spread out at the last prefix (a rise), even ones never do; all wrong
    _, _, records = _degenerate(plan, ["so 7"] * 6, lambda i, k, j: str(7 + (j % 3 if i % 2 and k == 2 else 0)))
    assert not records["correct"].any() and records["monotone"].nunique() == 2
    h1 = analyze(records, plan, "sha")["cells"]["weak-gsm8k"]["H1"]
    assert h1["gap_pp"] is None and h1["ci"] == [None, None] and h1["p_fisher"] is None
    assert h1["reason"] == f"correct is constant (0) over the {h1['n']} usable problems"


def test_a_chain_cut_by_its_budget_has_no_answer_of_its_own():
    """Its last number is an intermediate value, or cut in the middle ("... so 4" of "48")."""
    chains = _chains(["Step 1: 12 x 4 = 4"], "gsm8k", finish="length")
    assert chains["chain_answer"].isna().all() and chains["chain_status"].tolist() == [answers.TRUNCATED]
    assert bool(chains["reference_truncated"].iloc[0])
    finished = _chains(["Step 1: 12 x 4 = 48"], "gsm8k", finish="stop")
    assert finished["chain_answer"].tolist() == ["48"] and finished["chain_status"].tolist() == [answers.OK]
