"""Seed 002 answer-distribution trajectories: metrics, mechanisms, tables and figures.

Hand-made trajectories carry hand-computed values (derivations in comments); statistics are checked
against scipy/statsmodels and by a planted-mechanism simulation.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import statsmodels.api as sm
import statsmodels.formula.api as smf
from factories import records_frame
from statsmodels.stats.weightstats import DescrStatsW

from cotdyn.files.writers import png_bytes
from cotdyn.methods import dynamics as dyn
from cotdyn.report import dynamics_plots as plots

NAN = float("nan")


def is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def samples_from_states(
    states_by_problem: dict[str, list[dict]], n: int = 16, cell: str | None = None, stride: int = 16
) -> pd.DataFrame:
    """Samples whose empirical distributions are exactly the given states (multiples of 1/n).

    The key None stands for an unparseable sample (status 'no_answer')."""
    rows = []
    for pid, states in states_by_problem.items():
        for k, state in enumerate(states):
            j = 0
            for answer, p in state.items():
                for _ in range(round(p * n)):
                    rows.append(
                        {
                            "problem_id": pid,
                            "prefix": k,
                            "sample": j,
                            "prefix_tokens": stride * k,
                            "text": "...",
                            "answer": answer,
                            "status": "no_answer" if answer is None else "ok",
                        }
                    )
                    j += 1
            assert j == n, (pid, k, state)
    frame = pd.DataFrame(rows)
    if cell is not None:
        frame.insert(0, "cell", cell)
    return frame


# ---------------------------------------------------------------------------------------------
# distributions


def test_distributions_counts_nulls_as_a_class_and_orders_checkpoints():
    samples = samples_from_states(
        {
            "p1": [{"12": 0.5, None: 0.5}, {"12": 0.25, "18": 0.75}],
            "p2": [{None: 1.0}, {"7": 1.0}],
        },
        n=4,
    )
    samples = samples.sample(frac=1.0, random_state=0)  # row order must not matter
    got = dyn.distributions(samples)
    assert got == {
        "p1": [{dyn.NULL: 0.5, "12": 0.5}, {"12": 0.25, "18": 0.75}],
        "p2": [{dyn.NULL: 1.0}, {"7": 1.0}],
    }
    dropped = dyn.distributions(samples, null_class=False)
    # null dropped before normalising: 2 of 4 parseable -> "12" has probability 1; all-null -> {}
    assert dropped == {"p1": [{"12": 1.0}, {"12": 0.25, "18": 0.75}], "p2": [{}, {"7": 1.0}]}
    assert dyn.observed_states(dropped["p2"]) == [1]


def test_distributions_rejects_bad_input_naming_the_field():
    good = samples_from_states({"p": [{"1": 1.0}]}, n=2)
    with pytest.raises(ValueError, match="prefix_tokens"):
        dyn.distributions(good.drop(columns="prefix_tokens"))
    bad = good.copy()
    bad.loc[0, "status"] = "no_answer"
    with pytest.raises(ValueError, match="'answer' and 'status' disagree"):
        dyn.distributions(bad)
    with pytest.raises(ValueError, match="duplicate"):
        dyn.distributions(pd.concat([good, good.iloc[:1]]))
    sentinel = good.copy()
    sentinel["answer"] = dyn.NULL
    with pytest.raises(ValueError, match="sentinel"):
        dyn.distributions(sentinel)
    two = pd.concat([good.assign(cell="a-x"), good.assign(cell="b-x")])
    with pytest.raises(ValueError, match="several cells"):
        dyn.distributions(two)


def test_checkpoint_positions_aligned_and_checked():
    samples = samples_from_states({"p": [{"1": 1.0}, {"1": 1.0}, {"2": 1.0}]}, n=2)
    assert dyn.checkpoint_positions(samples) == {"p": [0, 16, 32]}
    ragged = samples.copy()
    ragged.loc[0, "prefix_tokens"] = 5
    with pytest.raises(ValueError, match="differs across samples"):
        dyn.checkpoint_positions(ragged)
    flat = samples.assign(prefix_tokens=0)
    with pytest.raises(ValueError, match="strictly increasing"):
        dyn.checkpoint_positions(flat)


# ---------------------------------------------------------------------------------------------
# Section 4.1 metrics on hand-made trajectories

# D_k: {a}, {b}, {a,b}, {b}, {a}
REVISING = [{"a": 0.6, "b": 0.4}, {"a": 0.3, "b": 0.7}, {"a": 0.5, "b": 0.5}, {"a": 0.25, "b": 0.75}, {"a": 1.0}]


def test_effective_support_is_mean_perplexity():
    # exp(H) = 2 for a fair coin, 1 for a point mass, 4 for uniform over four: mean (2+1+4)/3
    states = [{"a": 0.5, "b": 0.5}, {"a": 1.0}, {c: 0.25 for c in "abcd"}]
    assert dyn.trajectory_metrics(states)["S_eff"] == pytest.approx(7 / 3)
    rng = np.random.default_rng(0)
    for _ in range(5):  # independent: scipy's entropy in nats
        ps = rng.dirichlet(np.ones(5), size=4)
        states = [{str(i): float(x) for i, x in enumerate(p)} for p in ps]
        expected = np.mean([np.exp(scipy.stats.entropy(p)) for p in ps])
        assert dyn.trajectory_metrics(states)["S_eff"] == pytest.approx(expected)


def test_dominant_sets_keep_ties():
    assert dyn.dominant_set({"a": 0.5, "b": 0.5}) == {"a", "b"}
    assert dyn.dominant_set({"a": 0.1 + 0.2, "b": 0.3, "c": 0.4 - 1e-9 - 0.1 + 1e-9}) == {"a", "b", "c"}
    assert dyn.dominant_set({"a": 0.375, "b": 0.3125, dyn.NULL: 0.3125}) == {"a"}


def test_revision_counts_switches_and_returns_as_sets():
    # every consecutive pair of D_k differs -> 4 switches
    assert dyn.trajectory_metrics(REVISING)["N_switch"] == 4
    # returns: a re-enters at k=2 (was in D_0), a re-enters at k=4; b entering at k=3 is not an entry
    # (b was already in D_2) -> 2
    assert dyn.trajectory_metrics(REVISING)["N_return"] == 2
    # a first-time entry is a switch but not a return
    assert dyn.trajectory_metrics([{"a": 1.0}, {"b": 1.0}])["N_return"] == 0
    assert dyn.trajectory_metrics([{"a": 1.0}, {"a": 0.5, "b": 0.5}])["N_switch"] == 1  # gaining a co-leader switches


def test_motion_path_length_participation_directness():
    # J = TV steps: |.6-.3|=.3, .2, .25, .75 -> V = 1.5
    assert dyn.step_lengths(REVISING) == pytest.approx([0.3, 0.2, 0.25, 0.75])
    assert dyn.trajectory_metrics(REVISING)["V"] == pytest.approx(1.5)
    # PR = 1.5^2 / (4 * (.09 + .04 + .0625 + .5625)) = 2.25 / 3.02
    assert dyn.trajectory_metrics(REVISING)["PR"] == pytest.approx(2.25 / 3.02)
    # R_direct = TV(p_0, p_K) / V = 0.4 / 1.5
    assert dyn.trajectory_metrics(REVISING)["R_direct"] == pytest.approx(0.4 / 1.5)
    # evenly spread movement has PR = 1; all movement in one of four steps has PR = 1/4
    even = [{"a": 1 - x, "b": x} for x in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert dyn.trajectory_metrics(even)["PR"] == pytest.approx(1.0)
    assert dyn.trajectory_metrics(even)["R_direct"] == pytest.approx(1.0)
    burst = [{"a": 1.0}] * 4 + [{"b": 1.0}]
    assert dyn.trajectory_metrics(burst)["PR"] == pytest.approx(0.25)


def test_total_variation_over_union_of_supports():
    assert dyn.total_variation({"a": 1.0}, {"b": 1.0}) == 1.0
    p, q = np.array([0.2, 0.5, 0.3, 0.0]), np.array([0.0, 0.25, 0.25, 0.5])
    as_dict = lambda v: {k: float(x) for k, x in zip("abcd", v) if x > 0}  # noqa: E731
    assert dyn.total_variation(as_dict(p), as_dict(q)) == pytest.approx(0.5 * np.abs(p - q).sum())


def test_commitment_time():
    # a >= 0.8 from k = 2 on (0.85, 0.8), K = 3 -> 2/3; the early 0.9 does not count (it dips)
    states = [{"a": 0.9, "b": 0.1}, {"a": 0.7, "b": 0.3}, {"a": 0.85, "b": 0.15}, {"a": 0.8, "b": 0.2}]
    assert dyn.trajectory_metrics(states, 0.8)["t_commit"] == pytest.approx(2 / 3)
    assert dyn.trajectory_metrics(states, 0.7)["t_commit"] == pytest.approx(0.0)
    assert dyn.trajectory_metrics(REVISING, 0.8)["t_commit"] == pytest.approx(1.0)  # only the last point
    with pytest.raises(ValueError, match="tau"):
        dyn.trajectory_metrics(states, 0.5)


def test_undefined_cases_are_nan():
    still = [{"a": 0.9, "b": 0.1}] * 3  # V = 0
    m = dyn.trajectory_metrics(still)
    assert m["V"] == 0 and is_nan(m["PR"]) and is_nan(m["R_direct"])
    assert m["t_commit"] == 0.0 and m["N_switch"] == 0
    # no answer holds 0.8 through the end -> t_commit undefined
    assert is_nan(dyn.trajectory_metrics([{"a": 0.9, "b": 0.1}, {"a": 0.75, "b": 0.25}])["t_commit"])
    # a single checkpoint: K = 0, every per-step rate, PR, R_direct and t_commit undefined
    one = dyn.trajectory_metrics([{"a": 1.0}])
    assert one["K"] == 0 and one["S_eff"] == 1.0 and one["N_switch"] == 0 and one["V"] == 0
    for key in ("PR", "R_direct", "t_commit", "N_switch_per_step", "N_return_per_step", "V_per_step"):
        assert is_nan(one[key]), key
    with pytest.raises(ValueError, match="sum to 1"):
        dyn.trajectory_metrics([{"a": 0.5}])
    with pytest.raises(ValueError, match="empty"):
        dyn.trajectory_metrics([{"a": 1.0}, {}])


def test_per_step_rates_divide_by_K():
    m = dyn.trajectory_metrics(REVISING)
    assert m["K"] == 4
    assert m["N_switch_per_step"] == pytest.approx(4 / 4)
    assert m["N_return_per_step"] == pytest.approx(2 / 4)
    assert m["V_per_step"] == pytest.approx(1.5 / 4)


# ---------------------------------------------------------------------------------------------
# Proposition 2 witnesses (seed 002 Appendix C)

T1_ENDPOINT = [{"a": 0.9, "b": 0.1}] * 3
T2_ENDPOINT = [{"a": 0.1, "b": 0.9}, {"a": 0.4, "b": 0.6}, {"a": 0.9, "b": 0.1}]


def test_witness_same_endpoint_different_dynamics():
    assert dyn.dominant_set(T1_ENDPOINT[-1]) == dyn.dominant_set(T2_ENDPOINT[-1]) == {"a"}
    m1, m2 = dyn.trajectory_metrics(T1_ENDPOINT), dyn.trajectory_metrics(T2_ENDPOINT)
    assert (m1["N_switch"], m2["N_switch"]) == (0, 1)  # T2 revises from b to a
    assert m1["V"] == 0 and m2["V"] == pytest.approx(0.8)  # J = .3 + .5
    assert is_nan(m1["R_direct"]) and m2["R_direct"] == pytest.approx(1.0)  # TV(p0, pK) = .8
    assert m2["PR"] == pytest.approx(0.64 / (2 * (0.09 + 0.25)))
    assert m1["t_commit"] == 0.0 and m2["t_commit"] == 1.0
    s_09 = math.exp(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))  # 1.3841...
    s_06 = math.exp(-(0.6 * math.log(0.6) + 0.4 * math.log(0.4)))  # 1.9601...
    assert m1["S_eff"] == pytest.approx(s_09) and m2["S_eff"] == pytest.approx((2 * s_09 + s_06) / 3)
    # with gold a and a correct endpoint: stable success vs rescue
    assert dyn.mechanism(T1_ENDPOINT, "a", True) == "stable_success"
    assert dyn.mechanism(T2_ENDPOINT, "a", True) == "rescue"


P, Q = {"a": 0.9, "b": 0.1}, {"a": 0.1, "b": 0.9}


def test_witness_same_entropy_profile_different_distributions():
    t1, t2 = [P] * 3, [Q] * 3
    assert [dyn.entropy(s) for s in t1] == [dyn.entropy(s) for s in t2]
    assert t1 != t2
    assert dyn.gold_dominance(t1, "a") == [True] * 3 and dyn.gold_dominance(t2, "a") == [False] * 3
    assert dyn.mechanism(t1, "a", False) == "stochastic_miss"
    assert dyn.mechanism(t2, "a", False) == "never_discovered"
    # as two models' traces of one question: an exact entropy match that disagrees everywhere
    traces = [
        dyn.Trace("m1-task", "m1", "task", "q", (0, 16, 32), tuple(t1), 3, "a", False, 32.0),
        dyn.Trace("m2-task", "m2", "task", "q", (0, 16, 32), tuple(t2), 3, "a", False, 32.0),
    ]
    pairs = dyn.disagreement_pairs(traces)
    assert pairs.loc[0, ["rmse", "dominant_set", "gold_dominance", "mechanism"]].tolist() == [0.0, 1.0, 1.0, 1.0]
    curve = dyn.disagreement_curve(pairs)
    exact = curve[curve["bin"] == "exact"].iloc[0]
    assert exact["n_pairs"] == 1 and exact["dominant_set_pct"] == 100.0 and exact["mechanism_pct"] == 100.0
    assert curve.loc[curve["bin"] != "exact", "n_pairs"].sum() == 0


# ---------------------------------------------------------------------------------------------
# Section 4.2 mechanisms, one hand-made trajectory each

G, W = "g", "w"


@pytest.mark.parametrize(
    "states, correct, expected",
    [
        ([{G: 1.0}, {G: 0.5, W: 0.5}, {G: 0.75, W: 0.25}], True, "stable_success"),  # tie counts as dominant
        ([{W: 1.0}, {G: 0.5, W: 0.5}], True, "rescue"),
        ([{G: 1.0}, {W: 0.75, G: 0.25}, {G: 1.0}], True, "detour_success"),
        ([{G: 1.0}, {W: 0.75, G: 0.25}], True, "fragile_success"),
        ([{dyn.NULL: 0.75, G: 0.25}], True, "fragile_success"),  # a dominant null class hides gold
        ([{W: 1.0}, {"v": 0.5, W: 0.5}, {W: 1.0}], False, "never_discovered"),
        ([{G: 0.5, W: 0.5}, {G: 1.0}, {W: 1.0}], False, "escape"),
        ([{W: 1.0}, {G: 1.0}, {W: 1.0}], False, "failed_rescue"),
        ([{W: 1.0}, {G: 0.5, W: 0.5}], False, "stochastic_miss"),
        ([{G: 1.0}], False, "stochastic_miss"),
    ],
)
def test_mechanisms(states, correct, expected):
    assert dyn.mechanism(states, G, correct) == expected


def test_mechanisms_partition_each_outcome():
    # every gold-dominance pattern of length 3 gets exactly one label of its outcome's four
    for bits in range(8):
        states = [{G: 1.0} if bits >> k & 1 else {W: 1.0} for k in range(3)]
        assert dyn.mechanism(states, G, True) in dyn.SUCCESS_MECHANISMS
        assert dyn.mechanism(states, G, False) in dyn.FAILURE_MECHANISMS


# ---------------------------------------------------------------------------------------------
# profile_table: samples + records -> one row per problem


def small_cell():
    states = {"p1": T2_ENDPOINT_16, "p2": [{"5": 1.0}, {None: 0.75, "5": 0.25}], "p3": [{None: 1.0}]}
    samples = samples_from_states(states, n=16)
    records = records_frame(
        cell="qwen7b-gsm8k",
        problem_id=["p1", "p2", "p3", "p4"],
        gold=["a", "5", "9", "1"],
        correct=[True, True, False, True],
        chain_correct=[True, False, False, True],
        reference_tokens=[32, 16, 0, 10],
    )
    return samples, records


T2_ENDPOINT_16 = [{"a": 0.125, "b": 0.875}, {"a": 0.375, "b": 0.625}, {"a": 0.875, "b": 0.125}]


def test_profile_table_rows_match_trajectory_metrics():
    samples, records = small_cell()
    table = dyn.profile_table(samples, records)
    assert table["problem_id"].tolist() == ["p1", "p2", "p3"]  # p4 has no samples: skipped
    p1 = table.iloc[0]
    assert (p1["cell"], p1["model"], p1["task"]) == ("qwen7b-gsm8k", "qwen7b", "gsm8k")
    for key, value in dyn.trajectory_metrics(T2_ENDPOINT_16).items():
        assert p1[key] == pytest.approx(value, nan_ok=True), key
    assert p1["mechanism"] == "rescue" and p1["outcome"] == "success"
    # the default outcome is the chain's own answer (p2: incorrect); null holds 0.75 at p2's last
    # checkpoint, so gold "5" is dominant at 0 but not at K -> escape
    assert table.iloc[1]["mechanism"] == "escape"
    assert dyn.profile_table(samples, records, outcome="correct").iloc[1]["mechanism"] == "fragile_success"
    # without the null class p2's last checkpoint is {"5": 1} and p3 has no observed checkpoint
    dropped = dyn.profile_table(samples, records, null_class=False)
    assert dropped.iloc[1]["mechanism"] == "stochastic_miss"
    assert dropped.iloc[2]["n_observed"] == 0 and pd.isna(dropped.iloc[2]["mechanism"])
    assert is_nan(dropped.iloc[2]["S_eff"])


def test_profile_table_input_errors():
    samples, records = small_cell()
    with pytest.raises(ValueError, match="no record for cell 'qwen7b-gsm8k' problem_id 'p3'"):
        dyn.profile_table(samples, records[records["problem_id"] != "p3"])
    with pytest.raises(ValueError, match="chain_correct"):
        dyn.profile_table(samples, records.drop(columns="chain_correct"))
    two_cells = pd.concat([records, records.assign(cell="llama31-8b-gsm8k")])
    with pytest.raises(ValueError, match="add a 'cell' column"):
        dyn.profile_table(samples, two_cells)
    with pytest.raises(ValueError, match="duplicate"):
        dyn.profile_table(samples, pd.concat([records, records.iloc[:1]]))
    from cotdyn.plan.config import split_cell

    assert split_cell("llama31-8b-math500") == ("llama31-8b", "math500")
    with pytest.raises(ValueError, match="cell name 'nodash'"):
        split_cell("nodash")


# ---------------------------------------------------------------------------------------------
# Table 1: variance decomposition


def random_profiles(rng, n_models=4, n_tasks=3, balanced=False):
    rows = []
    for m in range(n_models):
        for t in range(n_tasks):
            n = 12 if balanced else int(rng.integers(2, 40))
            shift = rng.normal(0, 1) + 0.5 * m - 0.3 * t
            x = rng.normal(shift, rng.uniform(0.5, 2.0), size=n)
            rows += [{"model": f"m{m}", "task": f"t{t}", "x": v} for v in x]
    return pd.DataFrame(rows)


def test_variance_decomposition_recomposes_to_equal_cell_weight_variance():
    rng = np.random.default_rng(1)
    for _ in range(5):
        data = random_profiles(rng)
        data.loc[rng.random(len(data)) < 0.1, "x"] = np.nan  # undefined values are omitted
        row = dyn.variance_decomposition(data, metrics=["x"]).iloc[0]
        parts = row["model"] ** 2 + row["task"] ** 2 + row["model_x_task"] ** 2 + row["within"] ** 2
        assert parts == pytest.approx(row["total"] ** 2)
        # independent: population variance of the pooled data, each cell weighted equally
        d = data.dropna()
        weights = 1.0 / d.groupby(["model", "task"])["x"].transform("size")
        assert row["total"] ** 2 == pytest.approx(DescrStatsW(d["x"], weights=weights, ddof=0).var)
        assert row["complete_grid"] and row["n_traces"] == len(d)


def test_variance_decomposition_matches_two_way_anova_when_balanced():
    rng = np.random.default_rng(2)
    data = random_profiles(rng, balanced=True)
    row = dyn.variance_decomposition(data, metrics=["x"]).iloc[0]
    fit = smf.ols("x ~ C(model) * C(task)", data=data).fit()
    ss = sm.stats.anova_lm(fit, typ=1)["sum_sq"] / len(data)  # balanced: SS / N = sigma^2
    assert row["model"] ** 2 == pytest.approx(ss["C(model)"])
    assert row["task"] ** 2 == pytest.approx(ss["C(task)"])
    assert row["model_x_task"] ** 2 == pytest.approx(ss["C(model):C(task)"])
    assert row["within"] ** 2 == pytest.approx(ss["Residual"])


def test_variance_decomposition_needs_full_grid():
    data = random_profiles(np.random.default_rng(3), n_models=2, n_tasks=2)
    data.loc[(data["model"] == "m0") & (data["task"] == "t0"), "x"] = np.nan
    row = dyn.variance_decomposition(data, metrics=["x"]).iloc[0]
    assert not row["complete_grid"] and is_nan(row["total"])


# ---------------------------------------------------------------------------------------------
# Table 2: objective-conditioned profiles


def test_objective_profiles_standardize_within_task_and_pick_quartiles():
    rng = np.random.default_rng(4)
    rows = []
    for t, task in enumerate(("gsm8k", "math500")):
        for m in range(4):
            n = 5 + m
            for i in range(n):
                rows.append(
                    {
                        "model": f"m{m}",
                        "task": task,
                        "correct": bool((i + m + t) % 3),
                        "reference_tokens": 50.0 + 30 * m + 100 * t + i,
                        **{k: rng.normal(m, 1) for k in dyn.PROFILE_METRICS},
                    }
                )
    profiles = pd.DataFrame(rows)
    table = dyn.objective_profiles(profiles).set_index("objective")
    cond = (
        profiles.groupby(["model", "task"])
        .agg(
            accuracy=("correct", "mean"),
            cot=("reference_tokens", "mean"),
            **{k: (k, "mean") for k in dyn.PROFILE_METRICS},
        )
        .reset_index()
    )
    # independent: scipy's population z-score within each task
    z = cond.copy()
    for col in ("accuracy", *dyn.PROFILE_METRICS):
        z[col] = cond.groupby("task")[col].transform(lambda s: scipy.stats.zscore(s, ddof=0))
    z["cot"] = np.log(cond["cot"]).groupby(cond["task"]).transform(lambda s: scipy.stats.zscore(s, ddof=0))
    k = 2  # ceil(25% of 8 conditions)
    high = z.sort_values(["accuracy", "model", "task"], ascending=[False, True, True]).index[:k]
    short = z.sort_values(["cot", "model", "task"]).index[:k]
    for name, idx in (("high_accuracy", high), ("short_cot", short)):
        got = table.loc[name]
        assert got["n_conditions"] == k
        for metric in dyn.PROFILE_METRICS:
            assert got[metric] == pytest.approx(z.loc[idx, metric].mean())
        assert got["accuracy"] == pytest.approx(cond.loc[idx, "accuracy"].mean())
        assert got["cot_length"] == pytest.approx(cond.loc[idx, "cot"].mean())
    # m0 has the shortest chains in both tasks
    assert table.loc["short_cot", "conditions"] == "m0-gsm8k;m0-math500"


# ---------------------------------------------------------------------------------------------
# Planted-mechanism simulation: shares recovered from sampled continuations

K_SIM = 8  # checkpoints 0..8


def planted_path(mech: str, rng) -> tuple[list[bool], bool]:
    """(gold dominant at each checkpoint, realized correctness) realizing a mechanism."""
    g = np.zeros(K_SIM + 1, dtype=bool)
    if mech == "stable_success":
        g[:] = True
    elif mech == "rescue":
        g[rng.integers(2, 7) :] = True
    elif mech == "detour_success":
        s = rng.integers(2, 6)
        g[:] = True
        g[s : s + 2] = False
    elif mech == "fragile_success":
        g[: rng.integers(0, 8)] = True  # gold lost before the end
    elif mech == "escape":
        g[: rng.integers(5, 9)] = True  # late switch away from gold
    elif mech == "failed_rescue":
        s = rng.integers(1, 6)
        g[s : s + 2] = True
    elif mech == "stochastic_miss":
        g[rng.integers(0, 8) :] = True
    return g.tolist(), mech in dyn.SUCCESS_MECHANISMS


PLANTED = {  # mechanism probabilities per model (sum to 1)
    "m1": dict(
        zip((*dyn.SUCCESS_MECHANISMS, *dyn.FAILURE_MECHANISMS), (0.40, 0.10, 0.05, 0.05, 0.15, 0.15, 0.05, 0.05))
    ),
    "m2": dict(
        zip((*dyn.SUCCESS_MECHANISMS, *dyn.FAILURE_MECHANISMS), (0.15, 0.15, 0.10, 0.05, 0.10, 0.30, 0.10, 0.05))
    ),
}


def simulate(rng, per_cell=300, n=16):
    """Dominant answer holds 0.8 of the mass, the other candidate 0.1 and the null class 0.1."""
    names = list(PLANTED["m1"])
    sample_frames, records, planted = [], [], []
    for model, probs in PLANTED.items():
        for task in ("gsm8k", "math500"):
            cell = f"{model}-{task}"
            mechs = rng.choice(names, size=per_cell, p=[probs[m] for m in names])
            paths = [planted_path(mech, rng) for mech in mechs]
            gold_dominant = np.array([g for g, _ in paths])  # (problem, checkpoint)
            draws = rng.choice(3, size=(per_cell, K_SIM + 1, n), p=[0.8, 0.1, 0.1])  # top, other, null
            i = np.arange(per_cell)
            gold, wrong = np.char.mod("%d", 100 + i).astype(object), np.char.mod("%d", 900 + i).astype(object)
            top = np.where(gold_dominant, gold[:, None], wrong[:, None])
            other = np.where(gold_dominant, wrong[:, None], gold[:, None])
            answers = np.where(draws == 0, top[..., None], np.where(draws == 1, other[..., None], None))
            pid, k, j = np.meshgrid(i, np.arange(K_SIM + 1), np.arange(n), indexing="ij")
            sample_frames.append(
                pd.DataFrame(
                    {
                        "cell": cell,
                        "problem_id": np.char.mod("q%04d", pid.ravel()),
                        "prefix": k.ravel(),
                        "sample": j.ravel(),
                        "prefix_tokens": 16 * k.ravel(),
                        "answer": answers.ravel(),
                    }
                )
            )
            for idx, (mech, (_, correct)) in enumerate(zip(mechs, paths)):
                pid_s = f"q{idx:04d}"
                records.append(
                    {
                        "cell": cell,
                        "problem_id": pid_s,
                        "gold": gold[idx],
                        "correct": correct,
                        "chain_correct": correct,
                        "reference_tokens": 16 * K_SIM + idx % 7,
                    }
                )
                planted.append({"cell": cell, "problem_id": pid_s, "planted": mech})
    samples = pd.concat(sample_frames, ignore_index=True)
    samples["text"] = ""
    samples["status"] = np.where(samples["answer"].isna(), "no_answer", "ok")
    return samples, records_frame(**pd.DataFrame(records).to_dict("list")), pd.DataFrame(planted)


@pytest.fixture(scope="module")
def simulated():
    return simulate(np.random.default_rng(20260829))


def test_planted_mechanism_shares_are_recovered(simulated):
    samples, records, planted = simulated
    profiles = dyn.profile_table(samples, records)
    merged = profiles.merge(planted, on=["cell", "problem_id"])
    assert (merged["mechanism"] == merged["planted"]).mean() >= 0.99
    shares = dyn.mechanism_shares(profiles)
    for _, row in shares.iterrows():
        probs = PLANTED[row["model"]]
        mechs = dyn.SUCCESS_MECHANISMS if row["outcome"] == "success" else dyn.FAILURE_MECHANISMS
        truth = probs[row["mechanism"]] / sum(probs[m] for m in mechs)
        se = math.sqrt(truth * (1 - truth) / row["n_outcome"])
        assert abs(row["share"] - truth) < 4 * se + 1e-9, (row.to_dict(), truth)
    # m1 plants 60% successes, m2 45%: m1 is listed first
    assert list(dict.fromkeys(shares["model"])) == ["m1", "m2"]
    assert shares.groupby(["model", "outcome"])["share"].sum().to_numpy() == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# Figure 3: normalized time, RMSE, binning


def test_normalized_profile_reads_the_most_recent_checkpoint():
    states = ({"a": 1.0}, {"a": 0.5, "b": 0.5}, {"b": 1.0})
    trace = dyn.Trace("m-t", "m", "t", "q", (16, 56, 116), states, 3, "a", True, 116.0)
    prof = dyn.normalized_profile(trace)
    # t = (16,56,116) -> (0, 0.4, 1.0); entropy 0, ln 2, 0 interpolated linearly
    assert prof.entropy[20] == pytest.approx(0.5 * math.log(2))
    assert prof.entropy[40] == pytest.approx(math.log(2))
    assert prof.entropy[70] == pytest.approx(0.5 * math.log(2))
    assert prof.dominant[39] == {"a"} and prof.dominant[40] == {"a", "b"} and prof.dominant[99] == {"a", "b"}
    assert prof.dominant[100] == {"b"}
    assert prof.gold_dominant.sum() == 100  # gold "a" dominant until the last checkpoint at t = 1


def test_disagreement_pairs_hand_computed():
    h = [{"a": 1.0}, {"a": 1.0}]
    half = [{"a": 1.0}, {"b": 1.0}]
    mk = lambda model, states, correct: dyn.Trace(  # noqa: E731
        f"{model}-t", model, "t", "q", (0, 32), tuple(states), 2, "a", correct, 32.0
    )
    pairs = dyn.disagreement_pairs([mk("m1", h, True), mk("m2", half, True), mk("m3", h, False)])
    assert pairs[["model_a", "model_b"]].values.tolist() == [["m1", "m2"], ["m1", "m3"], ["m2", "m3"]]
    # m1 vs m2: same entropy (0 everywhere), dominant set differs only at t = 1 (1 of 101 points)
    assert pairs.loc[0, "rmse"] == 0.0 and pairs.loc[0, "dominant_set"] == pytest.approx(1 / 101)
    assert pairs.loc[0, "mechanism"] == 1.0  # stable success vs fragile success
    assert is_nan(pairs.loc[1, "mechanism"])  # different outcomes: not evaluated


def test_disagreement_curve_bins_are_right_closed():
    rmse = [0.0, 1e-13, 0.005, 0.01, 0.07, 0.0700001, 0.2, 0.25]
    pairs = pd.DataFrame(
        {
            "rmse": rmse,
            "dominant_set": [1, 0, 0.5, 0.25, 1, 0, 1, 1],
            "gold_dominance": 0.0,
            "mechanism": [1, NAN, 0, NAN, 1, 0, 1, 1],
        }
    )
    curve = dyn.disagreement_curve(pairs).set_index("bin")
    assert len(curve) == 21
    assert curve.loc["exact", "n_pairs"] == 2 and curve.loc["exact", "dominant_set_pct"] == 50.0
    assert curve.loc["exact", "n_mechanism_pairs"] == 1 and curve.loc["exact", "mechanism_pct"] == 100.0
    assert curve.loc["bin00", "n_pairs"] == 2 and curve.loc["bin00", "dominant_set_pct"] == 37.5
    assert curve.loc["bin00", "rmse_mid"] == pytest.approx(0.005)
    assert curve.loc["bin06", "n_pairs"] == 1 and curve.loc["bin07", "n_pairs"] == 1  # 0.07 in (0.06, 0.07]
    assert curve.loc["bin19", "n_pairs"] == 1  # 0.20 kept, 0.25 beyond the plotted range
    assert curve["n_pairs"].sum() == 7
    assert is_nan(curve.loc["bin10", "dominant_set_pct"])


# ---------------------------------------------------------------------------------------------
# Writing: files and byte-determinism


def test_write_dynamics_is_deterministic(simulated, tmp_path):
    samples, records, _ = simulated
    keep = samples["problem_id"] < "q0040"
    sub_samples, sub_records = samples[keep], records[records["problem_id"] < "q0040"]
    first = plots.write_dynamics(sub_samples, sub_records, tmp_path / "a")
    second = plots.write_dynamics(sub_samples.sample(frac=1.0, random_state=1), sub_records, tmp_path / "b")
    names = sorted(p.name for p in first)
    assert names == sorted(
        [
            "profiles.csv",
            "variance_decomposition.csv",
            "objective_profiles.csv",
            "mechanism_shares.csv",
            "disagreement_pairs.csv",
            "disagreement_curve.csv",
            "trajectories.png",
            "mechanism_shares.png",
            "disagreement.png",
        ]
    )
    for a, b in zip(sorted(first), sorted(second)):
        assert a.read_bytes() == b.read_bytes(), a.name
    for p in first:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"Software" not in p.read_bytes()
    profiles = pd.read_csv(tmp_path / "a" / "profiles.csv")
    assert len(profiles) == len(sub_records)
    decomposition = pd.read_csv(tmp_path / "a" / "variance_decomposition.csv")
    assert decomposition["metric"].tolist() == list(dyn.PROFILE_METRICS)


def test_trajectory_figure_for_chosen_problems(simulated):
    samples, records, _ = simulated
    traces = dyn.traces(samples[samples["problem_id"] < "q0003"], records[records["problem_id"] < "q0003"])
    examples = plots.example_traces(traces)
    assert len({dyn.trace_mechanism(t) for t in examples}) == len(examples)
    png = png_bytes(plots.trajectory_figure(traces[:3]))
    assert png == png_bytes(plots.trajectory_figure(traces[:3]))
    with pytest.raises(ValueError, match="no traces"):
        plots.trajectory_figure([])


def test_objective_profiles_zero_spread_sits_at_task_mean():
    # one model per task: no spread within a task, so every standardized value is 0 (not NaN)
    profiles = pd.DataFrame(
        {
            "model": ["m0", "m0"],
            "task": ["gsm8k", "math500"],
            "correct": [True, False],
            "reference_tokens": [100.0, 300.0],
            **{k: [1.0, 2.0] for k in dyn.PROFILE_METRICS},
        }
    )
    table = dyn.objective_profiles(profiles).set_index("objective")
    assert table.loc["high_accuracy", "n_conditions"] == 1  # ceil(25% of 2)
    assert table.loc["high_accuracy", list(dyn.PROFILE_METRICS)].tolist() == [0.0] * 7
    assert table.loc["high_accuracy", "conditions"] == "m0-gsm8k"  # tie on z = 0: (model, task) order


# ---------------------------------------------------------------------------------------------
# Seed 002 Def. 1: the last state sampled from the reasoning alone, or forced to the chain's answer


def test_commitment_time_is_in_token_normalised_time():
    # a >= 0.8 from checkpoint 2 on; checkpoints at 0, 16, 32 and the cut at 40 tokens:
    # index time 2/3, token time 32/40
    states = [{"a": 0.9, "b": 0.1}, {"a": 0.7, "b": 0.3}, {"a": 0.85, "b": 0.15}, {"a": 0.8, "b": 0.2}]
    metrics = dyn.trajectory_metrics(states, 0.8, positions=(0, 16, 32, 40))
    assert metrics["t_commit"] == pytest.approx(0.8) and metrics["t_commit_index"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="strictly increasing"):
        dyn.trajectory_metrics(states, 0.8, positions=(0, 16, 16, 40))
    # profile_table reads the positions from prefix_tokens
    samples = samples_from_states({"q": [{"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}, {"a": 1.0}, {"a": 1.0}]})
    samples.loc[samples["prefix"] == 3, "prefix_tokens"] = 40
    records = records_frame(problem_id=["q"], gold="a", chain_correct=True, reference_tokens=45)
    row = dyn.profile_table(samples, records).iloc[0]
    assert row["t_commit"] == pytest.approx(32 / 40) and row["t_commit_index"] == pytest.approx(2 / 3)


ENDPOINT_STATES = {
    # gold 18 dominant at the cut, but the chain states 11: sampled -> stochastic miss
    "miss": [{"7": 1.0}, {"18": 0.75, "7": 0.25}, {"18": 0.8125, "11": 0.1875}],
    # 11 dominant at the cut, but the chain states gold 18: sampled -> fragile success
    "fragile": [{"7": 1.0}, {"11": 0.75, "18": 0.25}, {"11": 0.75, "18": 0.25}],
}


def test_same_trace_sampled_and_forced_endpoint_give_the_two_mechanisms():
    from cotdyn.records.table import variant_samples

    samples = samples_from_states(ENDPOINT_STATES).assign(cell="m-gsm8k")
    chains = pd.DataFrame(
        {"problem_id": ["miss", "fragile"], "chain_answer": ["11", "18"], "reference_truncated": [False, False]}
    )
    records = records_frame(problem_id=["miss", "fragile"], gold="18", chain_correct=[False, True], reference_tokens=40)
    protocol = {"m": 16}

    def mechanisms(endpoint):
        chosen = variant_samples(samples, chains, protocol | {"endpoint": endpoint})
        table = dyn.profile_table(chosen, records, benchmarks={"m-gsm8k": "gsm8k"})
        return dict(zip(table["problem_id"], table["mechanism"]))

    assert mechanisms("reasoning") == {"fragile": "fragile_success", "miss": "stochastic_miss"}
    # forced: the last state is the chain's own answer, so gold dominance at K is the outcome
    assert mechanisms("forced") == {"fragile": "rescue", "miss": "failed_rescue"}
    # m keeps the first m samples of each prefix: with m = 4 the cut of "miss" reads {18: 1}
    few = variant_samples(samples, chains, {"m": 4, "endpoint": "reasoning"})
    assert few.groupby(["problem_id", "prefix"]).size().eq(4).all()
    assert dyn.distributions(few)["miss"][-1] == {"18": 1.0}


def test_gold_dominance_uses_answer_equivalence():
    # a MATH-500 class written differently from gold but equivalent to it
    states = {"q": [{"\\dfrac{1}{2}": 1.0}, {"\\dfrac{1}{2}": 1.0}]}
    samples = samples_from_states(states).assign(cell="m-math500")
    records = records_frame(
        cell="m-math500", problem_id=["q"], gold="\\frac{1}{2}", chain_correct=True, reference_tokens=16
    )
    by_string = dyn.profile_table(samples, records).iloc[0]
    by_equivalence = dyn.profile_table(samples, records, benchmarks={"m-math500": "math500"}).iloc[0]
    assert (by_string["mechanism"], by_string["gold_dominant_final"]) == ("fragile_success", False)
    assert (by_equivalence["mechanism"], by_equivalence["gold_dominant_final"]) == ("stable_success", True)


# ---------------------------------------------------------------------------------------------
# Planted truth under Def. 1: the chain's own answer is a draw from p_K, the answer distribution
# given its reasoning, so fragile successes and stochastic misses arise by chance; their expected
# shares follow exactly from binomial dominance probabilities (scipy), independent of dynamics.py.

N_DEF1 = 16
TEMPLATES = {  # true P(gold) at checkpoints 0..3; the other mass on one wrong answer
    "stays": (0.9, 0.9, 0.9, 0.85),
    "detour": (0.9, 0.2, 0.9, 0.9),
    "rescue": (0.1, 0.3, 0.8, 0.9),
    "escape": (0.9, 0.7, 0.2, 0.15),
    "never": (0.05, 0.1, 0.1, 0.1),
    "ambiguous": (0.2, 0.6, 0.5, 0.4),
    "late": (0.1, 0.2, 0.65, 0.6),
}


def _paper_mechanism(g: tuple[bool, ...], correct: bool) -> str:
    """Seed 002 section 4.2, written out again from the paper for the planted truth."""
    if correct:
        if not g[-1]:
            return "fragile_success"
        return "stable_success" if all(g) else ("rescue" if not g[0] else "detour_success")
    if g[-1]:
        return "stochastic_miss"
    if g[0]:
        return "escape"
    return "failed_rescue" if any(g[1:-1]) else "never_discovered"


def planted_def1_shares() -> dict[str, dict[str, float]]:
    """Expected mechanism shares among successes and failures, templates equally likely."""
    from itertools import product

    mass = {"success": {}, "failure": {}}
    for p_gold in TEMPLATES.values():
        # gold dominant (ties included) when at least half of the N samples are gold
        dominant = [scipy.stats.binom.sf(N_DEF1 // 2 - 1, N_DEF1, p) for p in p_gold]
        for g in product((False, True), repeat=len(p_gold)):
            p_g = math.prod(d if x else 1 - d for d, x in zip(dominant, g))
            for outcome, p_outcome in (("success", p_gold[-1]), ("failure", 1 - p_gold[-1])):
                mech = _paper_mechanism(g, outcome == "success")
                mass[outcome][mech] = mass[outcome].get(mech, 0.0) + p_g * p_outcome
    return {o: {m: v / sum(ms.values()) for m, v in ms.items()} for o, ms in mass.items()}


def test_def1_planted_mechanisms_including_fragile_success_and_stochastic_miss_are_recovered():
    rng = np.random.default_rng(2609)
    n_traces, names = 2100, list(TEMPLATES)
    which = rng.integers(0, len(names), size=n_traces)
    p_gold = np.array([TEMPLATES[names[i]] for i in which])  # (trace, checkpoint)
    is_gold = rng.random((*p_gold.shape, N_DEF1)) < p_gold[..., None]
    correct = rng.random(n_traces) < p_gold[:, -1]  # the chain's own answer, drawn from p_K
    trace, k, j = np.meshgrid(np.arange(n_traces), np.arange(p_gold.shape[1]), np.arange(N_DEF1), indexing="ij")
    samples = pd.DataFrame(
        {
            "cell": "m-gsm8k",
            "problem_id": np.char.mod("q%05d", trace.ravel()),
            "prefix": k.ravel(),
            "sample": j.ravel(),
            "prefix_tokens": 16 * k.ravel(),
            "answer": np.where(is_gold.ravel(), "18", "11"),
            "status": "ok",
        }
    )
    records = records_frame(
        problem_id=np.char.mod("q%05d", np.arange(n_traces)), gold="18", chain_correct=correct, reference_tokens=60
    )
    shares = dyn.mechanism_shares(dyn.profile_table(samples, records))
    truth = planted_def1_shares()
    assert truth["success"]["fragile_success"] > 0.03 and truth["failure"]["stochastic_miss"] > 0.03
    assert set(shares["mechanism"]) == set(dyn.SUCCESS_MECHANISMS + dyn.FAILURE_MECHANISMS)
    for row in shares.itertuples():
        expected = truth[row.outcome].get(row.mechanism, 0.0)
        assert expected > 0, row.mechanism  # every mechanism is planted
        se = math.sqrt(expected * (1 - expected) / row.n_outcome)
        assert abs(row.share - expected) < 4 * se, (row.mechanism, row.share, expected, se)


def test_mechanism_tables_say_what_the_endpoint_did_to_the_last_state():
    """Issue 24's planted chain: correct and finished, gold dominant at p = 1 until a last prefix of
    four nulls and one other answer. Under the registered endpoint (continuation, nulls dropped) it
    is labelled fragile_success off one sample; the table counts and notes that. Filling the nulls
    with the chain's answer (chain_answer) makes it a stable success."""
    from cotdyn.records.table import variant_samples

    answers = [["18"] * 5, ["18"] * 5, ["18"] * 5, [None, None, None, None, "17"]]
    samples = pd.DataFrame(
        [
            {
                "problem_id": "q1",
                "prefix": k,
                "sample": j,
                "prefix_tokens": 10 * k,
                "answer": a,
                "status": "ok" if a is not None else "no_answer",
            }
            for k, row in enumerate(answers)
            for j, a in enumerate(row)
        ]  # fmt: skip
    )
    records = records_frame(problem_id=["q1"], gold="18", chain_correct=True, reference_tokens=60)
    chains = pd.DataFrame({"problem_id": ["q1"], "chain_answer": ["18"], "reference_truncated": [False]})
    registered = dyn.profile_table(samples, records, null_class=False)
    # independent: the share of null answers at the last prefix, by pandas
    last = samples[samples["prefix"] == samples["prefix"].max()]
    assert registered["endpoint_null_share"].iloc[0] == pytest.approx(last["answer"].isna().mean()) == 0.8
    assert registered["mechanism"].iloc[0] == "fragile_success"
    shares = dyn.mechanism_shares(registered, "continuation").set_index("mechanism")
    assert shares.at["fragile_success", "count"] == 1 and shares.at["fragile_success", "n_null_endpoint"] == 1
    assert shares.at["stable_success", "n_null_endpoint"] == 0
    assert (shares["endpoint"] == "continuation").all()
    assert shares["endpoint_note"].str.startswith("last state sampled from the whole finished chain").all()
    filled = variant_samples(samples, chains, {"m": 5, "endpoint": "chain_answer"})
    again = dyn.profile_table(filled, records, null_class=False)
    assert again["mechanism"].iloc[0] == "stable_success" and again["endpoint_null_share"].iloc[0] == 0.0
    noted = dyn.mechanism_shares(again, "chain_answer").set_index("mechanism")
    assert noted.at["stable_success", "n_null_endpoint"] == 0
    assert noted["endpoint_note"].str.contains("filled with the chain's own answer").all()
    assert dyn.mechanism_shares(registered)["endpoint_note"].isna().all()  # no endpoint named, no note
