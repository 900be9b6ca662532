"""H3's size under the null with ties (issue 49: v3's t approximation against v4's permutation
test), and the Monte Carlo share both calibration studies report (``share``)."""

from __future__ import annotations

import math

import numpy as np

from cotdyn import stats


def share(hits: int, total: int) -> dict:
    """A share with its binomial Monte Carlo standard error."""
    if not total:
        return {"rate": None, "se": None, "k": 0, "of": 0}
    rate = hits / total
    return {"rate": rate, "se": math.sqrt(rate * (1 - rate) / total), "k": int(hits), "of": int(total)}


def null_ties_cell(
    n: int, accuracy: float, rng: np.random.Generator, zero_share: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """A true null with heavy ties: violations = min(Geometric(zero_share) - 1, 5) (a share
    ``zero_share`` of them 0, then geometrically fewer up to 5) independent of correct ~ Bernoulli(accuracy)."""
    violations = np.minimum(rng.geometric(zero_share, n) - 1, 5).astype(float)
    return violations, rng.random(n) < accuracy


def h3_size(
    n: int, accuracy: float, draws: int, seed: int, tests: dict, alphas=(0.05, 0.0125), zero_share: float = 0.5
) -> dict:
    """Rejection rates of each H3 test (``tests``: name -> p(x, y, draw seed)) over ``draws`` null
    cells. A cell where either vector is constant has no p-value; the registered Holm family enters it
    as undefined_p = 1, so it counts as not rejected (and is counted apart)."""
    # the zero share enters the stream's name only where it is not 1/2, the first run's law
    law = () if zero_share == 0.5 else (f"zero share {zero_share:g}",)
    rng = np.random.default_rng(stats.derive_seed(seed, "h3-size", str(n), str(accuracy), *law))
    p = {name: np.ones(draws) for name in tests}
    undefined = 0
    for i in range(draws):
        x, y = null_ties_cell(n, accuracy, rng, zero_share)
        if x.min() == x.max() or y.all() or not y.any():
            undefined += 1
            continue
        draw_seed = stats.derive_seed(seed, "h3-size", str(n), str(accuracy), *law, str(i))
        for name, test in tests.items():
            value = test(x, y, draw_seed)
            p[name][i] = value if math.isfinite(value) else 1.0
    return {
        "n": n,
        "accuracy": accuracy,
        "zero_share": zero_share,
        "draws": draws,
        "undefined": undefined,
        "tests": {name: {str(a): share(int((v <= a).sum()), draws) for a in alphas} for name, v in p.items()},
    }


def h3_tests(resamples: int, names=("t", "permutation")) -> dict:
    """v3's H3 p-value (scipy's t approximation) and v4's (the permutation test, each draw its own seed)."""
    tests = {
        "t": ("v3 t approximation", lambda x, y, _: stats.spearman_p(x, y, "less")),
        "permutation": (
            f"v4 permutation ({resamples})",
            lambda x, y, seed: stats.spearman_permutation_p(x, y, "less", resamples, seed),
        ),
    }
    return dict(tests[name] for name in names)
