"""One definition of each reported number: the accuracy gap (stats.gap_pp) is H1's, summary.json's,
the sweeps' and the panel table's, or null in all of them with the same reason; cut continuations
are visible in samples, records and summaries, and a variant can read their answers as none."""

import numpy as np
import pandas as pd
import pytest

from cotdyn import stats
from cotdyn.analysis import hypotheses as hyp
from cotdyn.analysis.calibration import PlantedCell, simulate_records
from cotdyn.analysis.exploratory import sweep_table
from cotdyn.plan.config import ConfigError, cut_answers, protocol_for
from cotdyn.plan.load import load_plan
from cotdyn.records import table as R


@pytest.fixture(scope="module")
def plan():
    from conftest import ROOT

    return load_plan(ROOT / "preregistration" / "plan.yaml")


def test_gap_pp_gives_the_gap_or_the_reason_it_is_none():
    mono = np.array([True] * 12 + [False] * 12)
    right = np.array([True] * 9 + [False] * 3 + [True] * 6 + [False] * 6)
    assert stats.gap_pp(mono, right, 10) == (pytest.approx(25.0), None)
    assert stats.gap_pp(mono, right, 13) == (
        None,
        "12 monotone, 12 non-monotone (< min_group_size 13): not an estimate",
    )
    assert stats.gap_pp(mono, right, None)[0] == pytest.approx(25.0)  # plan v1: no small-group rule
    assert stats.gap_pp(mono, np.ones(24, bool), 10) == (None, "correct is constant (1) over the 24 usable problems")
    assert stats.gap_pp(np.ones(24, bool), right, 10) == (None, "no non-monotone chains")
    assert stats.gap_pp(np.array([], bool), np.array([], bool), 10, n_excluded=3) == (
        None,
        "no usable problems (3 of 3 excluded)",
    )


def _records(truth: PlantedCell, seed: int) -> pd.DataFrame:
    records = simulate_records(truth, "c-x", seed)
    for column in ("endpoint_answered", "chain_correct"):
        if column not in records.columns:
            records[column] = True
    return records


def _samples(records: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"status": ["ok"] * 3, "finish_reason": ["stop", "length", "stop"]})


@pytest.mark.parametrize(
    "truth",
    [
        PlantedCell(n=80, coverage=0.5, acc_monotone=0.8, acc_non_monotone=0.4),  # an estimate
        PlantedCell(n=30, coverage=0.2, acc_monotone=0.8, acc_non_monotone=0.4),  # a group below 10
        PlantedCell(n=40, coverage=0.5, acc_monotone=0.0, acc_non_monotone=0.0),  # constant label
    ],
)
def test_summary_sweeps_and_h1_share_the_gap_and_its_reason(truth, plan):
    records = _records(truth, 3)
    result = hyp.analyze(records, plan, "sha")
    h1 = result["cells"]["c-x"]["H1"]
    summary = R.cell_summary(records, _samples(records), plan["analysis"]["groups"]["min_group_size"])
    assert summary["gap_pp"] == pytest.approx(h1["gap_pp"]) if h1["gap_pp"] is not None else summary["gap_pp"] is None
    assert summary["gap_pp_reason"] == h1["reason"]
    row = sweep_table({"registered": {"c-x": summary}})[0]
    assert (row["gap_pp"], row["gap_pp_reason"]) == (summary["gap_pp"], summary["gap_pp_reason"])
    panel = hyp.table_rows(result)["panel_table"]
    shown = next(r for r in panel if r["cell"] == "c-x")
    assert shown["gap_pp"] == h1["gap_pp"]


def test_a_constant_label_gives_no_gap_where_the_old_summary_said_zero(plan):
    records = _records(PlantedCell(n=40, coverage=0.5, acc_monotone=0.0, acc_non_monotone=0.0), 1)
    summary = R.cell_summary(records, _samples(records), 10)
    assert summary["gap_pp"] is None and summary["gap_pp_reason"].startswith("correct is constant (0)")


def _cut_samples() -> tuple[pd.DataFrame, pd.DataFrame]:
    chains = pd.DataFrame(
        {"problem_id": ["p"], "gold": ["29"], "chain_answer": ["29"], "reference_tokens": [40],
         "reference_truncated": [False]}
    )  # fmt: skip
    rows = []
    for prefix, reasons in enumerate([["stop"] * 5, ["length", "length", "stop", "stop", "stop"]]):
        for j, reason in enumerate(reasons):
            rows.append({"problem_id": "p", "prefix": prefix, "prefix_tokens": 10 * prefix, "raw_units": 2,
                         "sample": j, "text": "... we can add 29", "finish_reason": reason,
                         "hit_budget": reason == "length", "answer": "29", "status": "ok"})  # fmt: skip
    return chains, pd.DataFrame(rows)


def test_records_carry_the_share_of_answers_from_cut_continuations(plan):
    chains, samples = _cut_samples()
    protocol = protocol_for({"variants": {"registered": {}}}, plan, "registered")
    records = R.records_table(chains, samples, protocol, plan["exclusion"], "gsm8k", "c-x")
    assert records["cut_answer_share"].tolist() == [pytest.approx(2 / 10)]
    assert R.cell_summary(records, samples)["cut_answer_rate"] == pytest.approx(0.2)
    # a samples file from before the hit_budget column says it by its finish reason
    older = samples.drop(columns="hit_budget")
    assert R.hit_budget(older).tolist() == samples["hit_budget"].tolist()


def test_the_cut_answers_variant_reads_cut_continuations_as_no_answer(plan):
    chains, samples = _cut_samples()
    out = R.without_cut_answers(samples)
    cut = samples["hit_budget"].to_numpy()
    assert out.loc[cut, "answer"].isna().all() and (out.loc[cut, "status"] == "no_answer").all()
    assert out.loc[~cut, "answer"].tolist() == samples.loc[~cut, "answer"].tolist()
    protocol = protocol_for({"variants": {"registered": {}}}, plan, "registered")
    records = R.records_table(chains, out, protocol, plan["exclusion"], "gsm8k", "c-x")
    assert records["cut_answer_share"].tolist() == [0.0]
    config = {"variants": {"registered": {}, "cut": {"subsample_of": "registered", "cut_answers": "no_answer"}}}
    assert cut_answers(config, "cut") == "no_answer" and cut_answers(config, "registered") == "keep"
    # no protocol parameter: the variant's protocol is the registered one
    assert protocol_for(config, plan, "cut") == protocol_for(config, plan, "registered")
    with pytest.raises(ConfigError, match="unknown cut_answers 'drop'"):
        cut_answers({"variants": {"v": {"cut_answers": "drop"}}}, "v")
