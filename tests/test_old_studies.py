"""Studies written before issue 61's changes still audit PASS: tests/fixtures/studies/old-v3 and
old-v4 were made by the code at 8b422ed (`snakemake --cores 2 --configfile old-vN.yaml` run from
that checkout, one simulated cell of 12 GSM8K problems) and are kept as they were written."""

from __future__ import annotations

import shutil

import pytest
from conftest import ROOT

from cotdyn.audit.check import audit
from cotdyn.provenance.integrity import MATCH

STUDIES = ROOT / "tests" / "fixtures" / "studies"


@pytest.mark.parametrize(
    "study, plan", [("old-v3", "preregistration/v3/plan.yaml"), ("old-v4", "preregistration/v4/plan.yaml")]
)
def test_a_study_made_by_the_code_before_audits_pass(tmp_path, study, plan):
    folder = shutil.copytree(STUDIES / study, tmp_path / "results" / study)
    report = audit(folder, plan_path=ROOT / plan)
    assert report.ok, report.text()[:4000]
    rederived = [f.path for f in report.files if f.status == MATCH and "re-derived" in f.detail]
    # the analysis and every extra of a config without `extras` were recomputed, not taken on trust
    for path in ("analysis/registered/hypotheses.json", "analysis/registered/dynamics/profiles.csv",
                 "analysis/registered/math_shepherd.csv", "analysis/sweeps.csv"):  # fmt: skip
        assert path in rederived, (path, report.text()[:4000])
