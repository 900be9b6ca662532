"""The golden tests fail when a registered RULE changes, not only a value (issue 49, scope 2): each of
the eleven changes to registered computations that issue 49 lists, applied to the code in process
(never to the plan), makes the v4 golden comparison (tests/test_golden_plans.py) report a change. The
fixture cell that carries each rule is named in tests/fixtures/golden/make_records.py."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from test_golden_plans import GOLDEN, golden_changes

from cotdyn import stats
from cotdyn.analysis.hypotheses import cells, h5, verdicts


def _min_discordant_3(mp):  # (a) min_discordant_minority 5 -> 3
    rule = h5.h5_interval_rule
    mp.setattr(h5, "h5_interval_rule", lambda n, s: rule(n, replace(s, min_discordant_minority=3)))


def _untrusted_h5_decides(mp):  # (b) an untrusted H5 interval allowed to decide the verdict
    decides = verdicts.interval_decides
    mp.setattr(verdicts, "interval_decides", lambda block: "discordant_minority" in block or decides(block))


def _no_imprecise_h4(mp):  # (c) H4's imprecise verdict removed
    verdict = verdicts.estimation_verdict
    mp.setattr(verdicts, "estimation_verdict", lambda estimable, smallest, precise: verdict(estimable, smallest, None))


def _no_imprecise_flag(mp):  # (d) the H1-H3 imprecise flag removed
    rule = cells.group_rule

    def group_rule(sizes, s):
        small, flags = rule(sizes, s)
        return small, [f for f in flags if not f.startswith("imprecise")]

    mp.setattr(cells, "group_rule", group_rule)


def _no_kept_flag(mp):  # (e) the kept-fraction flag removed
    for module in (cells, h5, verdicts):
        mp.setattr(module, "kept_flags", lambda interval, s: [])


def _h3_t_approximation(mp):  # (f) H3 back to the t approximation
    mp.setattr(cells, "spearman_test_p", lambda x, y, alternative, *_: stats.spearman_p(x, y, alternative))


def _no_h5_zero_width(mp):  # (g) the H5 zero-width rule removed
    mp.setattr(h5, "zero_width_rule", lambda interval, s, hid: {})


def _no_perfect_separation(mp):  # (h) perfect separation back to not_estimable
    mp.setattr(cells, "RANGE_BOUNDS", {})


def _holm_alpha_halved(mp):  # (i) Holm's alpha read wrong
    holm = stats.holm
    mp.setattr(stats, "holm", lambda p, alpha: holm(p, alpha / 2))


def _holm_without_step_down(mp):  # (i) Holm's step-down broken: every p against alpha / m (Bonferroni)
    def bonferroni(p, alpha):
        p = np.asarray(p, dtype=float)
        return p <= alpha / p.size, np.minimum(p * p.size, 1.0)

    mp.setattr(stats, "holm", bonferroni)


def _min_group_off_by_one(mp):  # (j) the min_group_size threshold off by one
    small = stats.small_groups
    mp.setattr(stats, "small_groups", lambda sizes, m: small(sizes, None if m is None else m + 1))


def _quantile_rule_changed(mp):  # (k) the percentile interval's quantile rule changed
    interval = stats.percentile_interval
    mp.setattr(stats, "percentile_interval", lambda values, level, rule="linear": interval(values, level, "hazen"))


# Each mutation, and a pinned value it must move: the fixture cell built to carry that rule.
MUTATIONS = {
    "a: min_discordant_minority 5 -> 3": (_min_discordant_3, "cells.qwen7b-fewdiscordant.H5.ci_trusted"),
    "b: an untrusted H5 interval decides": (_untrusted_h5_decides, "verdicts.H5.qwen7b-cancelling.verdict"),
    "c: H4's imprecise verdict removed": (_no_imprecise_h4, "H4.h4.verdict"),
    "d: the H1-H3 imprecise flag removed": (_no_imprecise_flag, "cells.qwen7b-tencorrect.H2.flags"),
    "e: the kept-fraction flag removed": (_no_kept_flag, "cells.qwen7b-fewviolations.H3.flags"),
    "f: H3 back to the t approximation": (_h3_t_approximation, "holm.H3.qwen7b-gsm8k.p"),
    "g: the H5 zero-width rule removed": (_no_h5_zero_width, "cells.qwen7b-cancelling.H5.ci_trusted"),
    "h: perfect separation back to not_estimable": (_no_perfect_separation, "verdicts.H1.qwen7b-separated.verdict"),
    "i: Holm's alpha read wrong": (_holm_alpha_halved, "holm.H1.qwen7b-holmedge.reject"),
    "i: Holm's step-down broken": (_holm_without_step_down, "holm.H1.qwen7b-gsm8k.p_adjusted"),
    "j: min_group_size off by one": (_min_group_off_by_one, "cells.qwen7b-tencorrect.H2.rho"),
    "k: the quantile rule changed": (_quantile_rule_changed, "cells.qwen7b-gsm8k.H1.ci"),
}


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    return pd.read_parquet(GOLDEN / "records.parquet")


@pytest.mark.slow  # 13 analyses of the fixture's 33 cells: about 4 s each on a free core
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_mutation_of_a_registered_rule_fails_the_v4_golden_comparison(name, records, monkeypatch):
    """v4-rules.json pins every value v4.json pins (the same cells, the same rules) and the verdicts and
    Holm decisions of the widened hypotheses, so one comparison per mutation covers both files."""
    mutate, carrier = MUTATIONS[name]
    mutate(monkeypatch)
    changes = golden_changes("v4-rules", records)[0]
    assert changes, f"mutation '{name}' left every pinned v4 value unchanged"
    moved = {change.split(": ", 1)[0].strip() for change in changes}
    assert carrier in moved, f"mutation '{name}' did not move {carrier}, the value its fixture cell carries"


def test_v4_rules_pins_every_value_v4_pins():
    """The premise of the one comparison above: the widened plan pins every key of the registered one,
    with the same value but where the widening moves it (Holm's adjusted p of a larger family, a
    hypothesis's verdict over more cells)."""
    v4, rules = (json.loads((GOLDEN / f"{name}.json").read_text()) for name in ("v4", "v4-rules"))
    assert set(v4) <= set(rules)
    moved = {key for key in v4 if v4[key] != rules[key]}
    assert moved and all(key.startswith("holm.") or key.count(".") == 1 for key in moved), sorted(moved)
