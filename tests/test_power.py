"""The power analysis (cotdyn.analysis.power, ``cotdyn power``; issue 62): validity under the null,
power rising with the effect and with n, agreement with statsmodels' two-proportion power where H1's
registered decision reduces to one, the table moving with each registered setting it reads, its
determinism, and named errors for bad assumed effects."""

import copy
import hashlib
import json
import math
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from cotdyn.analysis import power
from cotdyn.analysis.calibration import PlantedCell
from cotdyn.cli.main import main
from cotdyn.plan.load import load_plan

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PLAN = ROOT / "preregistration" / "examples" / "default" / "plan.yaml"
CELL = "smollm2-additions"  # the embedded default's one cell, 40 problems
# The embedded default's plan without the assumed effects it registers (cotdyn init writes them last).
BARE_PLAN_TEXT = DEFAULT_PLAN.read_text().split("\nassumed_effects:")[0] + "\n"


def section(**law) -> dict:
    """Assumed effects for every cell: a gap at coverage and accuracy 0.5 with the simulator's
    default violation and confidence laws, overridden by ``law``."""
    default = {
        "gap_pp": 30.0,
        "coverage": 0.5,
        "accuracy": 0.5,
        "exclusion_rate": 0.0,
        "violation_rate_correct": 0.15,
        "violation_rate_incorrect": 0.35,
        "confidence_correct": 0.85,
        "confidence_incorrect": 0.55,
        "source": "tests: smallest effect of interest",
    }
    return {"min_power": 0.8, "default": {**default, **law}}


@pytest.fixture(scope="module")
def plan():
    return load_plan(DEFAULT_PLAN)


@pytest.fixture(scope="module")
def curve(plan):
    """The embedded default's table on a curve of 4 effect sizes, 150 studies each (n = 40)."""
    return power.power_analysis(plan, power.assumed_effects(plan, section()), 150, 11, (0, 0.5, 1, 1.5))


def by_id(result: dict) -> dict:
    return {h["id"]: h for h in result["hypotheses"]}


@pytest.mark.slow  # simulates hundreds of studies: the suite, not the inner loop
def test_null_false_support_is_at_most_alpha_plus_two_mc_se(curve):
    alpha = curve["alpha"]
    for hid in ("H1", "H3", "H5"):
        false = by_id(curve)[hid]["false_support"]
        assert false["of"] == 150
        assert false["rate"] <= alpha + 2 * false["se"], (hid, false)


@pytest.mark.slow  # 400 simulated studies
def test_null_false_support_agrees_with_the_calibration_scripts_verdict_rule(tmp_path):
    """Two drivers of the registered decision under the same null: the power analysis (records
    simulated, then ``analyze``) and scripts/calibrate_analysis.py's verdict-rule error (labels
    simulated, then the analysis's cell, Holm and verdict functions). On the panel's anchor cells
    with its Holm family, each hypothesis's and each cell's share declared supported agree within
    2 MC se of their difference."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import calibrate_analysis

    panel = load_plan(ROOT / "preregistration" / "plan.yaml")
    anchor, n, reps = calibrate_analysis.ANCHOR, 80, 200
    plan = copy.deepcopy(panel)
    plan["panel"] = {"anchor": "qwen7b", "standard": ["qwen7b"], "models": {"qwen7b": panel["panel"]["models"]["qwen7b"]},
                     "benchmarks": {b: {**v, "n": n} for b, v in panel["panel"]["benchmarks"].items()}}  # fmt: skip
    plan["hypotheses"] = [dict(h, cells=list(anchor)) for h in panel["hypotheses"] if h["id"] in ("H1", "H3")]
    nulls = {"qwen7b-gsm8k": PlantedCell.null(n, 0.563, 0.846), "qwen7b-math500": PlantedCell.null(n, 0.146, 0.505)}
    law = {k: getattr(nulls["qwen7b-gsm8k"], k) for k in power.PAIRS[0] + power.PAIRS[1]}
    effects = power.assumed_effects(
        plan,
        {"min_power": 0.8, "default": {"gap_pp": 10.0, "exclusion_rate": 0.0, **law, "source": "tests: the null"},
         "cells": {c: {"coverage": t.coverage, "accuracy": t.acc_monotone} for c, t in nulls.items()}},
    )  # fmt: skip
    sizes = power.registered_sizes(plan)
    runs = [power.study_verdicts(plan, effects, sizes, 0.0, power.replicate_seed(7, 0.0, i)) for i in range(reps)]
    script = calibrate_analysis.verdict_rule_error(nulls, {"H1", "H3"}, reps, panel, 8)["supported"]
    alpha = panel["holm"]["alpha"]
    for hid in ("H1", "H3"):
        tally = power._tally(runs, hid)
        for cell, ours in [("all", tally["verdicts"]["supported"])] + [
            (c, tally["cells"][c]["supported"]) for c in anchor
        ]:
            theirs = script[hid, cell]
            assert ours["rate"] <= alpha + 2 * ours["se"], (hid, cell, ours)
            assert abs(ours["rate"] - theirs["rate"]) <= 2 * math.hypot(ours["se"], theirs["se"]) + 1e-12, (
                hid,
                cell,
                ours,
                theirs,
            )


@pytest.mark.slow  # simulates hundreds of studies
def test_power_rises_with_the_effect(curve):
    for hid in ("H1", "H3"):
        points = by_id(curve)[hid]["curve"]
        assert [p["scale"] for p in points] == [0.0, 0.5, 1.0, 1.5]
        rates = [p["power"] for p in points]
        for lo, hi in zip(rates, rates[1:]):  # never falls by more than its MC error
            assert hi >= lo - 2 * math.sqrt((lo * (1 - lo) + hi * (1 - hi)) / 150), (hid, rates)
        assert rates[-1] - rates[0] > 0.3, (hid, rates)  # and rises well beyond it over the curve


@pytest.mark.slow  # simulates hundreds of studies: the suite, not the inner loop
def test_power_rises_with_n_and_the_problems_needed_reach_min_power(plan):
    effects = power.assumed_effects(plan, section())
    needed = power.problems_needed(plan, effects, (160, 40), 100, 11)
    assert set(needed) == {"H1", "H3", "H5"}
    for hid in ("H1", "H3"):
        small, big = needed[hid]["power_by_n"]
        assert (small["n"], big["n"]) == (40, 160)
        assert big["rate"] - small["rate"] > 2 * math.hypot(small["se"], big["se"]), (hid, small, big)
    # a 30-point gap: 40 problems fall short of min_power 0.8, 160 reach it
    h1 = needed["H1"]["power_by_n"]
    assert h1[0]["rate"] < 0.8 <= h1[1]["rate"] and needed["H1"]["needed"] == 160
    with pytest.raises(power.PowerInputError, match="give sizes >= 1"):
        power.problems_needed(plan, effects, (0, 40), 1, 11)


@pytest.mark.slow  # its fixture simulates 600 studies
def test_minimum_detectable_effect_reads_the_curve(curve):
    h1 = by_id(curve)["H1"]
    scale = h1["minimum_detectable"]["scale"]
    points = [(p["scale"], p["power"]) for p in h1["curve"]]
    if scale is None:
        assert all(p < curve["min_power"] for _, p in points)
    else:
        below = [s for s, p in points if p < curve["min_power"]]
        assert max(below) < scale <= min(s for s, p in points if p >= curve["min_power"])
        assert h1["minimum_detectable"]["truths"][CELL]["gap_pp"] == pytest.approx(30.0 * scale)
    assert h1["underpowered"] == (h1["power"]["rate"] < 0.8)
    # H2 (a null claim without a planted coherence law) and H4-like estimation are tabulated, not powered
    assert by_id(curve)["H2"]["powered"] is False and "power" not in by_id(curve)["H2"]


def test_minimum_detectable_interpolates_between_scales():
    assert power.minimum_detectable([(0, 0.05), (1, 0.6), (2, 1.0)], 0.8) == pytest.approx(1.5)
    assert power.minimum_detectable([(0, 0.05), (1, 0.6)], 0.8) is None
    assert power.minimum_detectable([(0, 0.05), (1, 0.8)], 0.8) == 1


def h1_only(plan: dict) -> dict:
    """The embedded default with H1 alone in its hypotheses and its Holm family: H1's registered
    decision is then its 95% bootstrap CI above 0 and its one-sided Fisher test at 0.05."""
    p = copy.deepcopy(plan)
    p["hypotheses"] = [h for h in p["hypotheses"] if h["id"] == "H1"]
    p["holm"]["family"] = [m for m in p["holm"]["family"] if m["id"] == "H1"]
    p["analysis"]["p_values"]["spearman_tests"]["H3"] = {"kind": "t_approximation"}  # no longer in the family
    return p


@pytest.mark.slow  # simulates hundreds of studies: the suite, not the inner loop
def test_h1_power_agrees_with_statsmodels_two_proportion_power(plan):
    # A 95% interval above 0 is a two-sided test at 0.05 on its upper side; the one-sided Fisher test
    # at 0.05 is weaker, so the decision is the two-proportion comparison of monotone against
    # non-monotone accuracy (n = 200 at coverage 0.5: 100 per group in expectation).
    p = h1_only(plan)
    null_laws = {"violation_rate_correct": 0.25, "violation_rate_incorrect": 0.25}
    effects = power.assumed_effects(
        p, section(gap_pp=20.0, **null_laws, confidence_correct=0.7, confidence_incorrect=0.7)
    )
    result = power.power_analysis(p, effects, 300, 3, (0, 1), n=200)
    law = power.planted(effects.laws[CELL], 200, 1.0)
    expected = NormalIndPower().power(
        proportion_effectsize(law.acc_monotone, law.acc_non_monotone), nobs1=100, alpha=0.05, ratio=1.0
    )
    h1 = by_id(result)["H1"]
    assert abs(h1["power"]["rate"] - expected) <= 2 * h1["power"]["se"], (h1["power"], expected)
    assert 0.6 < expected < 0.95  # a point where the curve is steep enough to tell a wrong decision
    # and under the null its false support is the test's one-sided 0.025
    assert abs(h1["false_support"]["rate"] - 0.025) <= 2 * math.sqrt(0.025 * 0.975 / 300)


@pytest.mark.slow  # three power tables
@pytest.mark.parametrize(
    "change, direction",
    [
        (lambda p: p["analysis"]["bootstrap"].update(level=0.8), "up"),
        (lambda p: p["holm"].update(alpha=0.001), "down"),
        (lambda p: p["hypotheses"][0]["criterion"].update(value=10.0), "down"),
    ],
    ids=["bootstrap level", "Holm alpha", "criterion value"],
)
def test_the_table_moves_with_each_registered_setting(plan, change, direction):
    effects = power.assumed_effects(plan, section())
    before = by_id(power.power_analysis(plan, effects, 40, 5, (0, 1)))["H1"]["power"]["rate"]
    changed = copy.deepcopy(plan)
    change(changed)
    after = by_id(power.power_analysis(changed, effects, 40, 5, (0, 1)))["H1"]["power"]["rate"]
    assert (after > before) if direction == "up" else (after < before), (before, after)


@pytest.mark.slow  # starts a pool of processes
def test_deterministic_from_its_seed_whatever_the_workers(plan):
    effects = power.assumed_effects(plan, section())
    one = power.power_analysis(plan, effects, 12, 7, (0, 1))
    two = power.power_analysis(plan, effects, 12, 7, (0, 1), workers=2)  # a second run, on two processes
    assert json.dumps(two, sort_keys=True) == json.dumps(one, sort_keys=True)  # to the byte
    other = power.power_analysis(plan, effects, 12, 8, (0, 1))
    assert [h["effect"] for h in other["hypotheses"]] != [h["effect"] for h in one["hypotheses"]]


@pytest.mark.parametrize(
    "entries, names",
    [
        ({"gap_pp": 150.0}, "assumed_effects.default.gap_pp: 150 is outside its range [-100, 100]"),
        ({"coverage": 1.5}, "assumed_effects.default.coverage: 1.5 is outside its range [0, 1]"),
        ({"accuracy": "high"}, "assumed_effects.default.accuracy: must be a number"),
        ({"accuracy": 0.9, "gap_pp": 40.0}, "assumed_effects.cells.smollm2-additions: impossible law"),
        ({"coverage": None}, "assumed_effects.cells.smollm2-additions: missing value(s) ['coverage']"),
        ({"temperature": 0.7}, "assumed_effects.default: unknown key(s) ['temperature']"),
        ({"source": None}, "assumed_effects.cells.smollm2-additions: missing key 'source'"),
    ],
)
def test_bad_assumed_effects_are_named_errors(plan, entries, names):
    s = section(**entries)
    s["default"] = {k: v for k, v in s["default"].items() if v is not None}
    with pytest.raises(power.PowerInputError, match="^" + re.escape(names)):
        power.assumed_effects(plan, s)


def test_section_level_errors_name_the_key(plan):
    with pytest.raises(power.PowerInputError, match="no 'assumed_effects' section"):
        power.assumed_effects({k: v for k, v in plan.items() if k != "assumed_effects"})
    with pytest.raises(power.PowerInputError, match="assumed_effects: missing key 'min_power'"):
        power.assumed_effects(plan, {"default": section()["default"]})
    with pytest.raises(power.PowerInputError, match=r"assumed_effects.min_power: 2 is outside"):
        power.assumed_effects(plan, {**section(), "min_power": 2})
    with pytest.raises(power.PowerInputError, match=r"assumed_effects.cells: \['nobody-additions'\] not a cell"):
        power.assumed_effects(plan, {**section(), "cells": {"nobody-additions": {"coverage": 0.4}}})
    # a cell's own value overrides the default, and is checked under the cell's key
    with pytest.raises(power.PowerInputError, match=r"assumed_effects.cells.smollm2-additions.coverage: -1"):
        power.assumed_effects(plan, {**section(), "cells": {CELL: {"coverage": -1}}})
    own = power.assumed_effects(plan, {**section(), "cells": {CELL: {"coverage": 0.3, "source": "pilot"}}})
    assert own.laws[CELL]["coverage"] == 0.3 and own.sources[CELL] == "pilot"


def test_cli_writes_the_table_json_and_figure(tmp_path, capsys):
    effects = tmp_path / "effects.yaml"
    effects.write_text(yaml.safe_dump({"assumed_effects": section()}))
    out = tmp_path / "power"
    args = ["power", "--plan", str(DEFAULT_PLAN), "--effects", str(effects), "--reps", "3", "--scales", "0,1"]
    assert main([*args, "--seed", "2", "--workers", "1", "--out", str(out), "--needed", "20,40"]) == 0
    printed = capsys.readouterr().out
    assert "H1" in printed and "supported" in printed and "wrote" in printed
    assert "H1: power by problems per cell 20: " in printed
    written = json.loads((out / "power.json").read_text())
    assert written["reps"] == 3 and written["seed"] == 2 and written["sizes"] == {CELL: 40}
    assert [x["n"] for x in written["problems_needed"]["H1"]["power_by_n"]] == [20, 40]
    assert (out / "power.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_bad_input_is_a_named_error_not_a_traceback(tmp_path, capsys):
    effects = tmp_path / "effects.yaml"
    effects.write_text(yaml.safe_dump({"assumed_effects": section(accuracy=1.2)}))
    bare = tmp_path / "plan.yaml"
    bare.write_text(BARE_PLAN_TEXT)
    base = ["power", "--plan", str(bare), "--out", str(tmp_path / "out")]
    assert main([*base, "--effects", str(effects)]) == 1
    assert capsys.readouterr().err.startswith("error: assumed_effects.default.accuracy: 1.2 is outside its range")
    assert main(base) == 1
    assert "no 'assumed_effects' section" in capsys.readouterr().err
    assert main([*base, "--assume", "min_power=0.8", "--assume", "gap_pp=10"]) == 1
    assert "missing value(s) ['coverage'" in capsys.readouterr().err
    assert main([*base, "--effects", str(tmp_path / "absent.yaml")]) == 1
    assert "absent.yaml" in capsys.readouterr().err
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(section()))  # the mapping itself, without the assumed_effects key
    assert main([*base, "--effects", str(good), "--scales", "0,half"]) == 1
    assert capsys.readouterr().err.startswith("error: --scales: '0,half' is not a comma-separated list of numbers")
    assert main([*base, "--effects", str(good), "--needed", "40,many"]) == 1
    assert capsys.readouterr().err.startswith("error: --needed: '40,many' is not a comma-separated list of numbers")
    assert not (tmp_path / "out").exists()


def test_an_estimation_hypothesis_is_tallied_by_its_own_verdicts():
    runs = [
        {"H4": {"verdict": "estimated", "cells": {"d-b": "estimated"}}},
        {"H4": {"verdict": "imprecise", "cells": {"d-b": "imprecise"}}},
    ]
    tally = power._tally(runs, "H4")
    assert tally["verdicts"]["supported"]["rate"] == 0 and tally["verdicts"]["imprecise"]["rate"] == 0.5
    assert tally["cells"]["d-b"]["estimated"] == {
        "rate": 0.5,
        "se": pytest.approx(0.5 / math.sqrt(2)),
        "count": 1,
        "of": 2,
    }


@pytest.mark.parametrize(
    "law, names",
    [
        ({"gap_pp": 150.0}, "assumed_effects.default.gap_pp: 150 is outside its range"),
        ({"coverage": None}, "assumed_effects.cells.smollm2-additions: missing value(s) ['coverage']"),
        ({"accuracy": 0.95, "gap_pp": 20.0}, "assumed_effects.cells.smollm2-additions: impossible law"),
    ],
)
def test_register_refuses_bad_assumed_effects_by_key(tmp_path, capsys, law, names):
    assumed = section(**law)
    assumed["default"] = {k: v for k, v in assumed["default"].items() if v is not None}
    plan = tmp_path / "plan.yaml"
    plan.write_text(BARE_PLAN_TEXT + yaml.safe_dump({"assumed_effects": assumed}))
    args = ["register", "--plan", str(plan), "--registered", str(tmp_path / "REGISTERED"), "--date", "2026-12-07"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {plan}: {names}"), err
    assert not (tmp_path / "REGISTERED").exists()


TABLE = {"replicates": 4, "seed": 3, "scales": [0, 1]}  # a registered table small enough for the inner loop


def _plan_with(tmp_path, **settings) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(BARE_PLAN_TEXT + yaml.safe_dump({"assumed_effects": {**section(), **TABLE, **settings}}))
    return plan


def _register(plan: Path, *flags: str) -> int:
    return main(["register", "--plan", str(plan), "--registered", str(plan.with_name("REGISTERED")),
                 "--date", "2026-12-07", *flags])  # fmt: skip


def test_register_records_the_power_table_and_plan_md_shows_it(tmp_path, capsys):
    from cotdyn.plan.plan_md import render_plan_md
    from cotdyn.plan.registered import read_registered

    plan = _plan_with(tmp_path, min_power=0.0)  # every power reaches 0: not underpowered
    assert _register(plan, "--underpowered") == 1  # nothing to declare
    assert "reaches its min_power; nothing to declare" in capsys.readouterr().err
    assert _register(plan) == 0
    record = read_registered(tmp_path / "REGISTERED")
    stored = (tmp_path / "power.json").read_bytes()
    assert record["power_table"] == "power.json" and "underpowered" not in record
    assert record["power_table_sha256"] == hashlib.sha256(stored).hexdigest()
    # the table as registered is the plan's own, at its replicates, seed and scales, and recomputes to it
    recomputed = power.registered_table(load_plan(plan))
    assert (recomputed["reps"], recomputed["seed"], recomputed["scales"]) == (4, 3, [0.0, 1.0])
    assert power.table_bytes(recomputed) == stored
    md = (tmp_path / "plan.md").read_text()
    assert md == render_plan_md(load_plan(plan), json.loads(stored))
    assert "## Power at registration" in md and "| H1 | smollm2-additions |" in md


def test_an_underpowered_plan_registers_only_with_the_flag_and_says_so(tmp_path, capsys):
    from cotdyn.plan.registered import read_registered

    plan = _plan_with(tmp_path, min_power=0.99)  # 4 studies of 40 problems: below 0.99
    assert _register(plan) == 1
    err = capsys.readouterr().err
    assert "is underpowered at registration: H1: power" in err and "--underpowered" in err
    assert not (tmp_path / "REGISTERED").exists() and not (tmp_path / "power.json").exists()
    assert _register(plan, "--underpowered") == 0
    record = read_registered(tmp_path / "REGISTERED")
    assert re.search(
        r"H1: power \d\.\d\d \(MC se \d\.\d\d\) for a 30-point gap \(min_power 0.99\)", record["underpowered"]
    )
    assert "registered underpowered (--underpowered): H1: power" in capsys.readouterr().out


def test_register_refuses_a_plan_without_the_table_settings_by_key(tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text(BARE_PLAN_TEXT + yaml.safe_dump({"assumed_effects": section()}))
    assert _register(plan) == 1
    assert "assumed_effects: missing key(s) ['replicates', 'seed', 'scales']" in capsys.readouterr().err
    for key, value, names in [
        ("replicates", 0, "assumed_effects.replicates: must be an integer >= 1, got 0"),
        ("seed", 1.5, "assumed_effects.seed: must be an integer >= 0, got 1.5"),
        ("scales", "0,1", "assumed_effects.scales: must be a list of numbers >= 0"),
        ("scales", [0, -1], "assumed_effects.scales: -1 is outside its range"),
    ]:
        with pytest.raises(power.PowerInputError, match="^" + re.escape(names)):
            power.assumed_effects(load_plan(DEFAULT_PLAN), {**section(), **TABLE, key: value})


def test_the_audit_checks_the_stored_table_and_recomputes_it_on_request(tmp_path):
    from cotdyn.audit.registration import power_check

    plan = _plan_with(tmp_path, min_power=0.99)
    assert _register(plan, "--underpowered") == 0
    loaded = load_plan(plan)
    words, problems = power_check(plan, loaded, recompute=False)
    assert words.startswith("power table: its hash checked against REGISTERED, not recomputed (cotdyn audit --power)")
    assert "underpowered at registration (H1: power" in words and problems == []
    words, problems = power_check(plan, loaded, recompute=True)
    assert words.startswith("power table: verified (recomputed from the plan and its seed)") and problems == []
    # a table other than the one the plan and its seed give: the stored file and the recomputation both fail
    record = (tmp_path / "REGISTERED").read_text()
    registered_sha = re.search(r"power_table_sha256: (\w+)", record).group(1)
    (tmp_path / "REGISTERED").write_text(record.replace(registered_sha, "0" * 64))
    words, problems = power_check(plan, loaded, recompute=True)
    assert words.startswith("power table: FAILED") and len(problems) == 2
    assert "recomputed from the plan and its seed, sha256 " + registered_sha in problems[1]
    # a plan that states no assumed effects has no power line
    assert power_check(plan, {k: v for k, v in loaded.items() if k != "assumed_effects"}, True) == (None, [])
    # the stored table is untrusted input: a FIFO in its place is named, not waited on
    (tmp_path / "power.json").unlink()
    os.mkfifo(tmp_path / "power.json")
    words, problems = power_check(plan, loaded, recompute=False)
    assert words.startswith("power table: FAILED") and "not a regular file" in problems[0], problems


def test_the_report_header_says_a_plan_was_registered_underpowered():
    from cotdyn.report.header import report_header

    said = "H1: power 0.10 (MC se 0.02) for a 10-point gap (min_power 0.8)"
    check = {"plan_sha256": "a" * 64, "registered": {"date": "2026-12-07", "underpowered": said}, "cells": {}}
    text = report_header("registered", {"plan_sha256": "a" * 64, "plan_version": 5}, check)
    assert f"**Underpowered at registration** ({said})." in text
    check["registered"].pop("underpowered")
    assert "Underpowered" not in report_header("registered", {"plan_sha256": "a" * 64}, check)


def test_cotdyn_power_reads_the_plans_own_effects_and_table_settings(tmp_path, capsys):
    plan = _plan_with(tmp_path, replicates=2, seed=5)
    assert main(["power", "--plan", str(plan), "--workers", "1", "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "power.json").read_text())
    assert (written["reps"], written["seed"], written["scales"]) == (2, 5, [0.0, 1.0])
    assert written["assumed_effects"][CELL]["gap_pp"] == 30.0


def test_init_prints_the_power_its_size_gives_under_the_proposed_effects(tmp_path, capsys):
    problems = tmp_path / "p.jsonl"
    problems.write_text("".join(json.dumps({"question": f"{i} + 1?", "gold": str(i + 1)}) + "\n" for i in range(30)))
    folder = tmp_path / "mine"
    args = ["init", str(folder), "--jsonl", str(problems), "--answer", "number", "--backend", "simulated"]
    assert main([*args, "--power-reps", "4"]) == 0
    printed = capsys.readouterr().out
    plan = load_plan(folder / "plan.yaml")
    effects = power.assumed_effects(plan)
    assert effects.sources["sim-p"].startswith("proposed by cotdyn init")
    # the written plan's own table at its seed, the numbers `cotdyn register` simulates at these reps
    expected = power.table_lines(power.power_analysis(plan, effects, 4, effects.seed, effects.scales))
    assert "power at this study's size (30 problems in sim-p)" in printed
    assert "\n".join(expected) in printed
    # none simulated on request; a count below 1 is a named error
    assert main([*args[:1], str(tmp_path / "other"), *args[2:], "--power-reps", "0"]) == 0
    assert "power: not simulated (--power-reps 0)" in capsys.readouterr().out
    assert main([*args[:1], str(tmp_path / "third"), *args[2:], "--power-reps", "-1"]) == 1
    assert "error: reps: must be >= 1" in capsys.readouterr().err
