"""A lab's addition takes its declaration and its own tests only (issue 50): a signal and a benchmark,
each provided by a tiny third-party distribution built here (a dist-info with entry_points.txt and a
module on sys.path), are found through their entry-point group, derive and grade right, and need no
edit anywhere in cotdyn or its other tests."""

from __future__ import annotations

import importlib
import json
import re
import sys
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import test_signals
import yaml
from conftest import ROOT
from factories import records_frame
from lab_plugins import BENCHMARK_MODULE, MONEY_ROWS, SIGNAL_MODULE, distribution
from test_pipeline import run_cell

from cotdyn import plugins
from cotdyn.analysis import exploratory as ex
from cotdyn.analysis.calibration import PlantedCell, simulate_records
from cotdyn.analysis.secondary import selective_accuracy
from cotdyn.dataset.benchmarks import load_benchmark
from cotdyn.grading import registry
from cotdyn.grading.answers import equivalent, extract, gold_answer
from cotdyn.plan.load import effective_protocol
from cotdyn.protocol import signals
from cotdyn.provenance.code import code_hash
from cotdyn.provenance.plugins import plugin_packages, study_plugins
from cotdyn.records import table as R


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install distributions into a fresh sys.path entry; afterwards forget what they declared."""
    tables = (registry.REGISTRY, registry.ORIGINS, registry.BROKEN, signals.SIGNALS, signals.ORIGINS, signals.BROKEN)
    before = [dict(table) for table in tables]
    modules = set(sys.modules)
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(name: str, module: str, source: str, group: str, entries: dict[str, str]):
        lines = "".join(f"{key} = {value}\n" for key, value in entries.items())
        distribution(tmp_path, name, "0.1", {module: source}, f"[{group}]\n{lines}")
        importlib.invalidate_caches()
        registry.discover()
        signals.discover()

    yield install
    for table, was in zip(tables, before):
        table.clear()
        table.update(was)
    for name in set(sys.modules) - modules:
        if name.startswith("lab_"):  # the plugins' own modules only: cotdyn's stay imported once
            sys.modules.pop(name)


def test_a_labs_signal_is_found_and_derived_where_a_study_names_it_and_reaches_the_ranking_only(
    installed, data_dir, plan
):
    installed("lab-signals", "lab_signals", SIGNAL_MODULE, "cotdyn.signals", {"settle_step": "lab_signals:SETTLE_STEP"})
    assert list(signals.SIGNALS)[-1] == "settle_step" and "settle_step" not in [s.name for s in signals.own_signals()]
    assert signals.package_of("settle_step") == "lab-signals 0.1"
    config = {"benchmarks": {"g": {"kind": "gsm8k"}}, "signals": ["settle_step"]}
    # the study manifest pins it, and a cell manifest records its version beside cotdyn's
    assert study_plugins(config) == {
        "benchmarks": {},
        "signals": {"settle_step": {"package": "lab-signals", "version": "0.1"}},
    }
    assert plugin_packages(config) == ("lab-signals",) and plugin_packages({**config, "signals": []}) == ()
    assert signals.package_of("monotone").startswith("cotdyn ")
    test_signals.test_the_registered_signals_are_seed_003s_four_oriented_higher_is_correct()  # its pins hold as they are
    # the one factory derives it where it is named, from per-prefix answers given (modes 5, 5, 7, 7:
    # settles at point 2)
    given = [[["5"] * 5, ["5", "5", "5", "6", None], ["7"] * 5, ["7", "7", "7", "7", "8"]]]
    named = records_frame(trajectory=[[0.0, 0.56, 0.0, 0.5]], prefix_answers=given, signals=["settle_step"])
    assert list(named["settle_step"]) == [2.0]
    assert "settle_step" not in records_frame(trajectory=[[0.0, 0.56, 0.0, 0.5]], prefix_answers=given)
    # ... and the calibration simulator, which no config names it for, does not compute it
    assert "settle_step" not in simulate_records(PlantedCell(30, 0.5, 0.7, 0.4), "qwen7b-gsm8k", seed=3)

    # a real cell's records: derived per chain as the records are built, for the study that names it
    protocol = effective_protocol(plan)
    gsm8k = load_benchmark({"kind": "gsm8k", "path": data_dir / "gsm8k_test.jsonl"})
    _, chains, _, _, samples, unnamed, _ = run_cell(gsm8k[:30], protocol, plan, "gsm8k")
    records = R.records_table(chains, samples, protocol, plan["exclusion"], "gsm8k", "c", signals=["settle_step"])
    # installed but not named, it changes nothing in a study
    pd.testing.assert_frame_equal(records.drop(columns="settle_step"), unnamed)
    kept = records[~records["excluded"]]
    assert ((kept["settle_step"] >= 0) & (kept["settle_step"] < kept["n_points"])).all()
    ranking = pd.DataFrame(ex.ranking_table(records, draws=5, seed=1)).set_index("signal")
    assert list(ranking.index) == ["monotone", "violations", "final_entropy", "coherence", "settle_step"]
    assert list(pd.DataFrame(ex.ranking_table(unnamed, draws=5, seed=1))["signal"]) == list(ranking.index[:4])
    assert ranking.loc["settle_step", "roc_auc"] == pytest.approx(
        ex.roc_area(signals.SIGNALS["settle_step"].score(ex.analyzed(records)), kept["correct"])
    )
    # the plan-fixed secondary analysis reads the registered four only
    rows = selective_accuracy(records, 0.737, np.tile(np.arange(len(kept)), (5, 1)), 0.95)
    assert [r["signal"] for r in rows] == ["monotone", "violations", "final_entropy", "coherence"]


def test_a_signal_a_study_names_must_be_installed():
    with pytest.raises(plugins.PluginError, match=r"config signals: 'settle_step' is not installed"):
        signals.study_signals(["settle_step"])


def test_a_labs_benchmark_is_found_and_grades_money_by_its_own_normalization(installed, tmp_path):
    (tmp_path / "svamp_money.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MONEY_ROWS))
    installed(
        "lab-benchmarks",
        "lab_benchmarks",
        BENCHMARK_MODULE,
        "cotdyn.benchmarks",
        {"svamp_money": "lab_benchmarks:SVAMP_MONEY"},
    )
    assert (
        registry.kinds()[-2:] == ["svamp_money", "jsonl"] and registry.package_of("svamp_money") == "lab-benchmarks 0.1"
    )
    declared = registry.REGISTRY["svamp_money"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no content sha256 pinned: the loader's loud warning
        problems = load_benchmark({"kind": "svamp_money", "path": declared.source})
    assert [(p.problem_id, p.gold_raw, p.gold) for p in problems] == [
        ("m-1", "$8.50", "8.5"),
        ("m-2", "$1,200.00", "1200"),
        ("m-3", "12", "12"),
    ]
    assert problems[0].question == "A pen costs $ 4.25. How much do 2 pens cost?"
    # a model's answer, however it writes the money, grades against the gold
    found = extract("Two pens cost 2 x $4.25 = $8.50.", "svamp_money")
    assert (found.answer, found.raw) == ("8.5", "$8.50")
    assert equivalent(found.answer, problems[0].gold, "svamp_money")
    assert equivalent("$8.50", "8.5", "svamp_money") and not equivalent("$8.05", "8.5", "svamp_money")
    assert equivalent("8.50", "8.5", "svamp_money", answer_form="canonical")
    assert gold_answer("$1,200.00", "svamp_money", answer_form="canonical") == "1200"
    # the registered rule of cotdyn's own benchmarks is unchanged beside it: SVAMP's number rule
    # keeps 8.50 and 8.5 apart under as_written (plans v1-v3), as it did
    assert gold_answer("$8.50", "svamp") == "8.50" and not equivalent("$8.50", "8.5", "svamp")


def test_a_labs_benchmark_runs_a_cell_and_is_a_kind_the_config_takes(installed, tmp_path, plan):
    from cotdyn.generation.backends.validation import validate_config

    (tmp_path / "svamp_money.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MONEY_ROWS))
    installed(
        "lab-benchmarks",
        "lab_benchmarks",
        BENCHMARK_MODULE,
        "cotdyn.benchmarks",
        {"svamp_money": "lab_benchmarks:SVAMP_MONEY"},
    )
    config = yaml.safe_load((ROOT / "config" / "simulated.yaml").read_text())
    validate_config({**config, "benchmarks": {"money": {"kind": "svamp_money"}}}, "test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problems = load_benchmark({"kind": "svamp_money", "path": registry.REGISTRY["svamp_money"].source})
    protocol = effective_protocol(plan)
    records = run_cell(problems, protocol, plan, "svamp_money")[5]
    # the gold's class under the plan's answer form (v4: canonical, so 8.5 is \frac{17}{2})
    form = protocol["answer_form"]
    assert list(records["gold"]) == [gold_answer(r["Answer"], "svamp_money", answer_form=form) for r in MONEY_ROWS]
    assert records["gold"].iloc[1] == "1200" and records["correct"].notna().all()


def _value(canonical) -> Fraction | None:
    """The value of a class in the canonical form (an integer, or \\frac{p}{q}); None for no answer."""
    if not isinstance(canonical, str):
        return None
    fraction = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", canonical)
    if fraction:
        return Fraction(int(fraction[2]), int(fraction[3])) * (-1 if fraction[1] else 1)
    return Fraction(int(canonical))


# Golds that are no whole number: under canonical each is a \\frac, which the lab's money rule cannot read.
FRACTION_ROWS = [
    {"ID": f"f-{i}", "Body": f"A box costs $ {cost}.", "Question": "How much is it?", "Answer": f"${cost}"}
    for i, cost in enumerate(["1117.25", "8.50", "0.75", "12.5", "3.25", "40.10", "2.5", "99.99"])
]


def test_a_labs_benchmark_grades_wrong_answers_wrong_under_every_answer_form(installed, tmp_path, plan):
    """Finding 1 of issue 65: under canonical, classes are stored as \\frac{4469}{4}, which the lab's
    own rule cannot read; two unreadable sides were equal (None == None), so wrong answers graded correct."""
    (tmp_path / "svamp_money.jsonl").write_text("".join(json.dumps(r) + "\n" for r in FRACTION_ROWS))
    installed(
        "lab-benchmarks",
        "lab_benchmarks",
        BENCHMARK_MODULE,
        "cotdyn.benchmarks",
        {"svamp_money": "lab_benchmarks:SVAMP_MONEY"},
    )
    assert not equivalent("\\frac{4469}{4}", "\\frac{17}{2}", "svamp_money", answer_form="canonical")
    assert equivalent("\\frac{17}{2}", "$8.50", "svamp_money", answer_form="canonical")
    for form in ("as_written", "canonical"):
        # an unreadable side equals nothing, in every answer form, for a plugin's rule and the types'
        for benchmark in ("svamp_money", "gsm8k", "math500", "svamp", "arc"):
            assert not equivalent("no number", "nor here", benchmark, answer_form=form), (benchmark, form)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problems = load_benchmark({"kind": "svamp_money", "path": registry.REGISTRY["svamp_money"].source})
    protocol = effective_protocol(plan)
    assert protocol["answer_form"] == "canonical"
    records = run_cell(problems, protocol, plan, "svamp_money")[5]
    # the grade is the answers' values compared, read here without cotdyn's grading
    expected = [
        _value(pred) is not None and _value(pred) == _value(gold)
        for pred, gold in zip(records["pred"], records["gold"])
    ]
    assert list(records["correct"]) == expected
    assert not all(expected) and any(expected)  # the cell has wrong chains, and right ones


def test_a_broken_plugin_is_named_where_it_is_used_and_the_others_stay(installed):
    installed(
        "lab-broken",
        "lab_broken",
        "import no_such_package_here\n",
        "cotdyn.benchmarks",
        {"broken_bench": "lab_broken:BENCH"},
    )
    assert "broken_bench" not in registry.REGISTRY and "gsm8k" in registry.REGISTRY
    with pytest.raises(KeyError, match=r"'broken_bench' from lab-broken 0.1 failed to load .*no_such_package_here"):
        registry.entry({"kind": "broken_bench"})


def test_a_plugins_signal_may_not_be_registered(installed):
    module = SIGNAL_MODULE.replace("derive=_settle_step)", "derive=_settle_step, registered=True)")
    installed("lab-signals", "lab_signals", module, "cotdyn.signals", {"settle_step": "lab_signals:SETTLE_STEP"})
    assert "settle_step" not in signals.SIGNALS
    assert "only the plan version fixes" in str(signals.BROKEN["settle_step"])
    # an unnamed broken plugin changes no study; a study that names it is refused
    assert [s.name for s in signals.study_signals()] == ["monotone", "violations", "final_entropy", "coherence"]
    with pytest.raises(ImportError, match="lab-signals 0.1 is declared registered"):
        signals.study_signals(["settle_step"])


def test_an_edit_to_a_labs_signal_changes_the_code_hash_of_the_jobs_that_read_signals_only(installed, tmp_path):
    """Issue 65: every job folded every plugin into its hash, so an edit to a signal reran the plan
    check and generation too; a job now hashes a group's plugins where its code reads that registry."""
    installed("lab-signals", "lab_signals", SIGNAL_MODULE, "cotdyn.signals", {"settle_step": "lab_signals:SETTLE_STEP"})
    scripts, readers = ROOT / "workflow" / "scripts", ("records.py", "exploratory.py")
    every = (*readers, "check_plan.py", "problems.py", "reference.py", "continuations.py")
    hashes = lambda: {s: code_hash(scripts / s, ROOT / "src") for s in every}  # noqa: E731
    before = hashes()
    module = tmp_path / "lab_signals.py"
    module.write_text(module.read_text().replace("return float(step)", "return float(step) + 1.0"))
    after = hashes()
    assert [s for s in every if after[s] != before[s]] == list(readers)
