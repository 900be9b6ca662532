"""The plan v4 calibration grid (cotdyn.analysis.calibration_grid, scripts/calibrate_analysis.py
--only grid / h3-size): its exact laws and truths against draws and scipy, the script's smallest
run, and that a deliberately too-narrow interval reads as under-coverage (so the check can fail)."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from cotdyn import stats
from cotdyn.analysis import calibration_grid as grid
from cotdyn.analysis import calibration_latent as latent_law
from cotdyn.analysis import calibration_size as size
from cotdyn.analysis.hypotheses import Settings
from cotdyn.plan.load import load_plan

ROOT = Path(__file__).resolve().parents[1]
PLAN = load_plan(ROOT / "preregistration" / "plan.yaml")


def test_grade_correlation_of_an_empirical_law_is_scipys_spearman():
    # the law of a finite sample's own rows: its population rho is that sample's rho, exactly
    rng = np.random.default_rng(3)
    x = np.minimum(rng.geometric(0.4, 300) - 1, 4)
    y = rng.random(300) < 0.3 + 0.1 * (x == 0)
    law = pd.DataFrame({"violations": x, "correct": y}).value_counts().rename("mass").reset_index()
    law["mass"] /= len(x)
    assert latent_law.grade_correlation(law, "violations") == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)


def test_latent_law_is_its_draws_and_its_truths_are_scipys_on_a_large_sample():
    setting = [s for s in grid.grid_settings() if s.key == "latent acc=0.5 signal"][0]
    law = setting.population
    assert law["mass"].sum() == pytest.approx(1.0, abs=1e-12)
    assert law.loc[law["correct"], "mass"].sum() == pytest.approx(0.5, abs=1e-12)
    assert law.loc[law["violations"] == 0, "mass"].sum() == pytest.approx(latent_law.VIOLATION_CUTS[0], abs=1e-12)
    # the latents themselves, drawn (not the table): one common factor, cut at the same quantiles
    rng = np.random.default_rng(7)
    n, loads = 400_000, latent_law.LatentLaw.signal(0.5)
    f = rng.standard_normal(n)

    def latent(a):
        return a * f + np.sqrt(1 - a * a) * rng.standard_normal(n)

    v = np.searchsorted(sps.norm.ppf(latent_law.VIOLATION_CUTS), latent(loads.violations))
    c = np.asarray(latent_law.COHERENCE_LEVELS)[
        np.searchsorted(sps.norm.ppf(latent_law.COHERENCE_CUTS), latent(loads.coherence))
    ]
    y = latent(loads.correct) > sps.norm.ppf(0.5)
    se = 1 / np.sqrt(n)  # rho's MC se is at most about 1/sqrt(n)
    assert setting.truth["H3"] == pytest.approx(sps.spearmanr(v, y).statistic, abs=5 * se)
    assert setting.truth["H2"] == pytest.approx(sps.spearmanr(c, y).statistic, abs=5 * se)
    gap = 100 * (y[v == 0].mean() - y[v > 0].mean())
    assert setting.truth["H1"] == pytest.approx(gap, abs=5 * 100 * np.sqrt(0.25 / (0.45 * n) + 0.25 / (0.55 * n)))
    # the table's masses against the draws' frequencies
    seen = pd.Series(list(zip(v, c, y))).value_counts() / n
    for row in law.itertuples():
        observed = seen.get((row.violations, row.coherence, row.correct), 0.0)
        # summed over confidence, which the draws above leave out
        expected = law.loc[
            (law["violations"] == row.violations)
            & (law["coherence"] == row.coherence)
            & (law["correct"] == row.correct),
            "mass",
        ].sum()
        assert observed == pytest.approx(expected, abs=5 * np.sqrt(expected / n) + 1e-5)


def test_null_truths_are_zero():
    for s in grid.grid_settings():
        if s.signal == "null":
            assert s.truth["H1"] == pytest.approx(0, abs=1e-9)
            assert s.truth["H3"] == pytest.approx(0, abs=1e-9)
            assert s.truth["H2"] is None or s.truth["H2"] == pytest.approx(0, abs=1e-9)


def _run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "calibrate_analysis.py"), *args, "--v4-out", str(out)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    assert "command: python" in done.stdout and "seed" in done.stdout
    return json.loads(out.read_text())


@pytest.mark.slow  # starts the script's interpreter
def test_the_scripts_smallest_grid_and_size_runs(tmp_path):
    result = _run(tmp_path, "--only", "grid", "--v4-n", "40", "--v4-cells", "2", "--v4-no-h5")
    assert result["part"] == "grid" and result["cells_per_setting"] == {"40": 2}
    # 12 cell laws: H1 and H3 on each, H2 on the 6 latent ones; H4 on one panel per process
    counts = pd.Series([r["hypothesis"] for r in result["settings"]]).value_counts().to_dict()
    assert counts == {"H1": 12, "H3": 12, "H2": 6, "H4": 2}
    for row in result["settings"]:
        assert row["cells"] == 2
        assert set(row["unflagged_coverage"]) == {"rate", "se", "k", "of"}
    assert set(result["pooled_unflagged_coverage"]) == {"H1", "H2", "H3", "H4"}

    size = _run(tmp_path, "--only", "h3-size", "--v4-n", "40", "--size-accuracy", "0.5", "--size-draws", "4")
    (setting,) = size["settings"]
    assert setting["draws"] == 4 and set(setting["tests"]) == {"v3 t approximation", "v4 permutation (9999)"}
    assert set(setting["tests"]["v3 t approximation"]) == {"0.05", "0.0125"}


def band_reading(x: dict, low: float = 0.93, high: float = 0.97) -> str:
    """Where a coverage share lies against the band [low, high] given its MC se: ``under`` or
    ``over`` when rate +- 2 se lies wholly outside it, ``within`` otherwise (``none``: no interval)."""
    if x["rate"] is None:
        return "none"
    if x["rate"] + 2 * x["se"] < low:
        return "under"
    return "over" if x["rate"] - 2 * x["se"] > high else "within"


def test_a_too_narrow_interval_reads_as_under_coverage():
    s = grid.grid_for_coverage(Settings.from_plan(PLAN))
    setting = [x for x in grid.grid_settings() if x.key == "latent acc=0.5 signal"][0]
    registered = grid.run_grid([setting], {150: 60}, s, 11, h5=False)
    narrow = grid.run_grid([setting], {150: 60}, replace(s, level=0.5), 11, h5=False)  # a 50% interval read as 95%
    for h in ("H1", "H2", "H3"):
        ok = grid.pooled([r for r in registered if r["hypothesis"] == h])[h]
        bad = grid.pooled([r for r in narrow if r["hypothesis"] == h])[h]
        assert ok["of"] == bad["of"] == 60  # every interval unflagged at n = 150, accuracy 0.5
        assert band_reading(ok) == "within", (h, ok)
        assert band_reading(bad) == "under", (h, bad)


def test_h3_size_counts_rejections_and_cells_without_a_p_value():
    # at n = 5 and accuracy 0.1 many cells have no correct problem: no p-value, not rejected
    result = size.h3_size(5, 0.1, 200, 1, {"always": lambda x, y, seed: 0.01})
    assert result["undefined"] > 0
    rates = result["tests"]["always"]
    assert rates["0.05"]["k"] == rates["0.0125"]["k"] == 200 - result["undefined"]
    # the t approximation is scipy's p-value
    x, y = size.null_ties_cell(40, 0.5, np.random.default_rng(2))
    assert stats.spearman_p(x, y, "less") == sps.spearmanr(x, y, alternative="less").pvalue
