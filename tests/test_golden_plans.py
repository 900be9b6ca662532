"""Golden outputs per plan version: every registered value of the analysis of fixed records, pinned
(tests/fixtures/golden/README.md says which code computed each file). A registered value belongs to
its plan version: a code change that alters one fails here, and the change is registered as a new
plan version instead (docs/developer-notes.md, "How a registered computation changes")."""

from __future__ import annotations

import importlib.util
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from cotdyn.analysis.hypotheses import analyze
from cotdyn.plan.load import load_plan, plan_sha256

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
PLANS = {
    "v1": ROOT / "preregistration" / "v1" / "plan.yaml",
    "v2": ROOT / "preregistration" / "v2" / "plan.yaml",
    "v3": ROOT / "preregistration" / "v3" / "plan.yaml",
}
# v1's registration-era code (3b9f0a3) gave a constant label a gap of 0, CI [0, 0], p = 1; the code
# since 87f7308 reports them null with the reason. The one known difference, stated, not hidden.
KNOWN = {
    "v1": {
        "cells.qwen7b-allright.H1.gap_pp": None,
        "cells.qwen7b-allright.H1.ci": [None, None],
        "cells.qwen7b-allright.H1.p_fisher": None,
    }
}
MESSAGE = (
    "a registered output changed under an existing plan version ({version}); register a new plan "
    "version instead (docs/developer-notes.md, 'How a registered computation changes'):\n{changes}"
)


def _registered_values():
    spec = importlib.util.spec_from_file_location("registered_values", GOLDEN / "registered_values.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.registered_values


def _same(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    return pd.read_parquet(GOLDEN / "records.parquet")


@pytest.mark.parametrize("version", sorted(PLANS))
def test_every_registered_value_is_what_its_plan_version_computed(version, records):
    plan = PLANS[version]
    now = _registered_values()(analyze(records, load_plan(plan), plan_sha256(plan)))
    pinned = {**json.loads((GOLDEN / f"{version}.json").read_text()), **KNOWN.get(version, {})}
    changes = [
        f"  {key}: pinned {value!r}, now {now.get(key, '<absent>')!r}"
        for key, value in pinned.items()
        if key not in now or not _same(value, now[key])
    ]
    assert not changes, MESSAGE.format(version=version, changes="\n".join(changes))
    # the newest version's file is today's output: nothing it registers is left unpinned (the older
    # files hold what their registration-era code reported; values added since are not theirs)
    if version == max(PLANS):
        assert not set(now) - set(pinned), MESSAGE.format(version=version, changes=sorted(set(now) - set(pinned)))


def test_the_golden_records_are_what_their_script_makes():
    spec = importlib.util.spec_from_file_location("make_records", GOLDEN / "make_records.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = io.BytesIO()
    module.records().to_parquet(made, index=False)  # through parquet, as the file was written
    pd.testing.assert_frame_equal(pd.read_parquet(made), pd.read_parquet(GOLDEN / "records.parquet"))


def test_v2_computes_h5_from_the_cell_matrix_and_v3_from_the_stratified_split(records):
    """The one registered computation that moved under plan v2 (3a21348): v2 computes its registered
    scheme again, v3 registers the stratified one; the two differ on the same records."""
    v2 = json.loads((GOLDEN / "v2.json").read_text())
    v3 = json.loads((GOLDEN / "v3.json").read_text())
    assert v2["cells.qwen7b-gsm8k.H5.reduction_pp"] == v3["cells.qwen7b-gsm8k.H5.reduction_pp"]
    assert v2["cells.qwen7b-gsm8k.H5.ci"] != v3["cells.qwen7b-gsm8k.H5.ci"]
