"""The records simulator's exact feature law and H5's planted truth (cotdyn.analysis.calibration),
against Monte Carlo draws of the simulator itself and sklearn."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from cotdyn.analysis.calibration import PlantedCell, feature_population, h5_planted_reduction_pp, simulate_labels

TRUTH = PlantedCell.from_summary(1319, 0.563, 0.846, 9.62, exclusion_rate=0.05)


@pytest.fixture(scope="module")
def draws():
    big = PlantedCell(**{**TRUTH.__dict__, "n": 400_000})
    labels = simulate_labels(big, np.random.default_rng(11))
    used = ~labels.excluded
    return pd.DataFrame({"violations": labels.violations[used], "final_confidence": labels.final_confidence[used],
                         "correct": labels.correct[used], "monotone": labels.monotone[used]})  # fmt: skip


def test_feature_population_is_the_simulators_law(draws):
    law = feature_population(TRUTH)
    assert law["mass"].sum() == pytest.approx(1.0)
    keys = ["violations", "final_confidence", "correct"]
    empirical = draws.groupby(keys).size() / len(draws)
    merged = law.set_index(keys)["mass"].to_frame().join(empirical.rename("seen"), how="outer").fillna(0.0)
    se = np.sqrt(merged["mass"] * (1 - merged["mass"]) / len(draws))
    assert (np.abs(merged["seen"] - merged["mass"]) <= 5 * se + 1e-6).all()
    assert law.loc[law["correct"], "mass"].sum() == pytest.approx(0.846, abs=1e-12)  # the planted accuracy


def test_h5_planted_reduction_is_the_fitted_filter_on_a_large_sample(draws):
    # a filter fitted on a small simulated cell, held fixed; the truth is its top-coverage accuracy
    train = draws.iloc[:800]
    model = LogisticRegression(C=1.0, max_iter=1000).fit(train[["violations", "final_confidence"]], train["correct"])
    planted = h5_planted_reduction_pp(
        feature_population(TRUTH), model.coef_[0], model.intercept_[0], TRUTH.coverage, TRUTH.acc_monotone
    )
    # independent: sklearn's probabilities on 400k draws, the top 56.3% with ties shared, minus the monotone accuracy
    p = model.predict_proba(draws[["violations", "final_confidence"]])[:, 1]
    k = TRUTH.coverage * len(draws)
    tiers = pd.DataFrame({"p": p, "y": draws["correct"]}).groupby("p")["y"].agg(["size", "sum"]).iloc[::-1]
    before = tiers["size"].cumsum() - tiers["size"]
    accepted = np.clip(k - before, 0, tiers["size"])
    acc_top = (accepted * tiers["sum"] / tiers["size"]).sum() / k
    sample = 100 * (acc_top - draws.loc[draws["monotone"], "correct"].mean())
    assert planted == pytest.approx(sample, abs=0.4)  # Monte Carlo se of the sample value ~0.1 pp
    assert planted > 0  # planted: confidence and violations carry signal beyond the flag
