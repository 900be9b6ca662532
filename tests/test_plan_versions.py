"""Each plan version computes what it registered (docs/reference.md section 5, "Plan versions"): the
key that selects a computation, its registered default where a version predates it, and plan v3's
rules for values fixed by construction."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cotdyn.analysis.hypotheses import Settings, analyze
from cotdyn.analysis.hypotheses import inputs as hypotheses_inputs
from cotdyn.analysis.hypotheses.cells import zero_width_rule
from cotdyn.analysis.hypotheses.h5 import h5_triage_filter
from cotdyn.analysis.hypotheses.inputs import CellData
from cotdyn.plan.load import load_plan
from cotdyn.stats import Interval

ROOT = Path(__file__).resolve().parents[1]
PREREG = ROOT / "preregistration"
V1, V2, V3 = (
    load_plan(p) for p in (PREREG / "v1" / "plan.yaml", PREREG / "v2" / "plan.yaml", PREREG / "v3" / "plan.yaml")
)
RECORDS = ROOT / "tests" / "fixtures" / "golden" / "records.parquet"


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    return pd.read_parquet(RECORDS)


def test_each_version_reads_its_registered_h5_resampling_and_rules():
    assert [Settings.from_plan(p).ci_resampling for p in (V1, V2, V3)] == [
        "test_split_stream", "cell_matrix", "stratified_split",
    ]  # fmt: skip
    assert [Settings.from_plan(p).degenerate for p in (V1, V2, V3)] == ["reported", "reported", "not_estimable"]
    assert [Settings.from_plan(p).min_discordant_minority for p in (V1, V2, V3)] == [None, None, 5]


@pytest.mark.parametrize("block, key", [("h5", "ci_resampling"), ("h5", "min_discordant_minority")])
def test_a_version_3_plan_must_name_each_key(block, key):
    plan = copy.deepcopy(V3)
    del plan["analysis"][block][key]
    with pytest.raises(KeyError, match=key):
        Settings.from_plan(plan)


def test_a_version_3_plan_must_name_its_degenerate_rule_and_an_unknown_one_is_refused():
    plan = copy.deepcopy(V3)
    del plan["verdict_rule"]["degenerate"]
    with pytest.raises(KeyError, match="degenerate"):
        Settings.from_plan(plan)
    plan["verdict_rule"]["degenerate"] = "ignored"
    with pytest.raises(ValueError, match="verdict_rule.degenerate"):
        Settings.from_plan(plan)
    plan = copy.deepcopy(V3)
    plan["analysis"]["h5"]["ci_resampling"] = "jackknife"
    with pytest.raises(ValueError, match="analysis.h5.ci_resampling"):
        Settings.from_plan(plan)


def _h5(records: pd.DataFrame, plan: dict, cell: str) -> dict:
    plan = copy.deepcopy(plan)
    for h in plan["hypotheses"]:
        if h["id"] == "H5":
            h["cells"] = [cell]
    return analyze(records, plan, "0" * 64)


def test_v3_no_baseline_false_positive_is_not_estimable_with_its_reason_v2_read_not_supported(records):
    cell = "qwen7b-nobaselinefp"
    v3, v2 = _h5(records, V3, cell), _h5(records, V2, cell)
    h5 = v3["cells"][cell]["H5"]
    assert h5["reduction_pp"] is None and h5["ci"] == [None, None]
    assert "no false positive among the baseline's" in h5["reason"] and "cannot exceed 0" in h5["reason"]
    assert v3["verdicts"]["H5"]["cells"][cell]["verdict"] == "not_estimable"
    # as v2 registered it: every resample's reduction <= 0, read not_supported
    assert v2["cells"][cell]["H5"]["ci"][1] <= 0
    assert v2["verdicts"]["H5"]["cells"][cell]["verdict"] == "not_supported"


def test_v3_a_baseline_that_keeps_the_whole_test_split_is_not_estimable_with_its_reason(records):
    cell = "qwen7b-allmonotone"
    v3 = _h5(records, V3, cell)
    h5 = v3["cells"][cell]["H5"]
    assert h5["k"] == h5["n_test"] and h5["ci"] == [None, None]
    assert f"k = n_test = {h5['n_test']}" in h5["reason"]
    assert v3["verdicts"]["H5"]["cells"][cell]["verdict"] == "not_estimable"
    assert _h5(records, V2, cell)["verdicts"]["H5"]["cells"][cell]["verdict"] == "not_supported"


def test_v3_few_discordant_minority_problems_keep_the_estimate_and_decide_nothing(records):
    cell = "qwen7b-lopsided"
    v3 = _h5(records, V3, cell)
    h5 = v3["cells"][cell]["H5"]
    assert h5["reduction_pp"] is not None and h5["ci"][0] is not None
    assert h5["discordant_minority"] < 5 and h5["ci_trusted"] is False
    assert any(f.startswith("imprecise:") and "min_discordant_minority 5" in f for f in h5["flags"])
    entry = v3["verdicts"]["H5"]["cells"][cell]
    assert entry["ci_criterion"] == entry["verdict"] == "not_estimable"


def _cell(monotone, correct, confidence) -> CellData:
    monotone, correct = np.asarray(monotone, dtype=bool), np.asarray(correct, dtype=bool)
    violations = np.where(monotone, 0.0, 1.0)
    features = np.column_stack([violations, np.asarray(confidence, dtype=float)])
    return CellData("m-b", monotone.size, 0, monotone, correct, violations, violations, features,
                    np.full(monotone.size, 5.0), None, None)  # fmt: skip


def test_v3_a_test_split_on_which_filter_and_baseline_agree_is_flagged_not_an_exact_zero():
    """[0, 0] there carries no sampling error, yet the filter differs from the baseline on problems the
    split lacks (docs/reference.md section 5): flagged, and the cell decides nothing."""
    rng = np.random.default_rng(3)
    n = 400
    monotone = rng.random(n) < 0.5
    correct = rng.random(n) < np.where(monotone, 0.8, 0.4)
    # confidence carries nothing: the filter ranks by violations alone, monotone problems first
    block = h5_triage_filter(_cell(monotone, correct, np.full(n, 0.6)), Settings.from_plan(V3))
    assert block["reduction_pp"] == 0.0 and block["ci"] == [0.0, 0.0] and block["discordant_minority"] == 0
    assert block["ci_trusted"] is False and any(f.startswith("imprecise: 0 discordant") for f in block["flags"])


def test_v3_a_zero_width_interval_is_flagged_and_decides_nothing():
    s3, s2 = Settings.from_plan(V3), Settings.from_plan(V2)
    rule = zero_width_rule(Interval(2.0, 2.0, 1000, 1000), s3)
    assert rule["ci_trusted"] is False and "zero-width interval [2, 2]" in rule["flags"][0]
    assert zero_width_rule(Interval(1.0, 2.0, 1000, 1000), s3) == {"ci_trusted": True, "flags": []}
    assert zero_width_rule(Interval(2.0, 2.0, 1000, 1000), s2) == {}  # v2 registered no such rule


def test_h4_names_the_cell_and_the_reason_its_gap_is_undefined(records):
    records = records.copy()
    records.loc[records["cell"] == "mistral7b-gsm8k", "correct"] = True  # groups large, label constant
    plan = copy.deepcopy(V3)  # a distilled model whose groups are large enough on the fixture
    plan["panel"].update(distilled="llama31-8b", standard=["qwen7b", "mistral7b"])
    reason = analyze(records, plan, "0" * 64)["H4"]["gsm8k"]["reason"]
    assert reason.startswith("H1's gap is undefined in mistral7b-gsm8k: correct is constant (1)")


def test_the_golden_test_catches_a_changed_registered_computation(records, monkeypatch):
    """A check that can fail: v2 computed with v3's resampling differs from v2's golden file."""
    monkeypatch.setitem(hypotheses_inputs.PLAN_V2_UNREGISTERED, "ci_resampling", "stratified_split")
    golden = json.loads((ROOT / "tests" / "fixtures" / "golden" / "v2.json").read_text())
    moved = analyze(records, V2, "0" * 64)["cells"]["qwen7b-gsm8k"]["H5"]["ci"]
    assert [round(x, 6) for x in moved] != [round(x, 6) for x in golden["cells.qwen7b-gsm8k.H5.ci"]]


def test_the_three_resamplings_agree_on_the_estimate_and_differ_in_the_interval(records):
    rows = records[(records["cell"] == "qwen7b-gsm8k") & ~records["excluded"]]
    v = rows["violations"].to_numpy(dtype=float)
    d = CellData("qwen7b-gsm8k", len(rows), 0, rows["monotone"].to_numpy(), rows["correct"].to_numpy(bool), v, v,
                 rows[["violations", "final_confidence"]].to_numpy(dtype=float), np.full(len(rows), 5.0), None, None)  # fmt: skip
    s = Settings.from_plan(V3)
    blocks = [h5_triage_filter(d, replace(s, ci_resampling=r)) for r in hypotheses_inputs.CI_RESAMPLINGS]
    assert len({b["reduction_pp"] for b in blocks}) == 1
    assert len({tuple(b["ci"]) for b in blocks}) == 3
