"""The ranking signals are declared once (cotdyn.protocol.signals): their definitions are pinned, and a
signal declared in one place reaches the records, the exploratory ranking, its figure and page,
but not the plan-fixed secondary analysis."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from factories import records_frame
from test_pipeline import run_cell

from cotdyn.analysis import exploratory as ex
from cotdyn.analysis.secondary import selective_accuracy
from cotdyn.dataset.benchmarks import load_benchmark
from cotdyn.plan.load import effective_protocol
from cotdyn.protocol import signals
from cotdyn.protocol.trajectory import answer_classes, majority
from cotdyn.records import table as R
from cotdyn.records.contract import RECORD_COLUMNS
from cotdyn.report.exploratory_tables import TABLES_HTML, write_exploratory


def test_the_registered_signals_are_seed_003s_four_oriented_higher_is_correct():
    # seed 003 Appendix F.1: the monotone flag, -violations, -final entropy and coherence C as it stands;
    # pinned: the registered ones (a signal a lab's package adds is declared beside them, never registered)
    registered = signals.registered_signals()
    assert [s.name for s in registered] == ["monotone", "violations", "final_entropy", "coherence"]
    assert list(signals.SIGNALS)[:4] == [s.name for s in registered]  # cotdyn's own come first
    records = records_frame(monotone=[True, False], violations=[0, 3], final_entropy=[0.0, 1.2], coherence=[0.5, -0.1])
    scores = {s.name: list(s.score(records)) for s in registered}
    assert scores == {
        "monotone": [1.0, 0.0],
        "violations": [-0.0, -3.0],
        "final_entropy": [-0.0, -1.2],
        "coherence": [0.5, -0.1],
    }
    assert {s.name for s in registered} <= set(RECORD_COLUMNS)
    assert signals.caption_list(registered) == "the monotone flag, -violations, -final entropy and coherence C"


def test_the_risk_coverage_caption_names_the_declared_signals_not_a_count(settle_step):
    """The caption reads the rule's ``signals`` param (the study's signals, workflow/rules/exploratory.smk)."""
    from test_hostile_pages import page_text, snakemake_rst

    caption = ROOT / "workflow" / "report" / "exploratory_risk_coverage_png.rst"
    assert "four" not in caption.read_text()
    page = page_text(
        snakemake_rst(
            caption, {}, params=SimpleNamespace(signals=signals.caption_list(signals.study_signals(["settle_step"])))
        )
    )
    assert "the monotone flag, -violations, -final entropy, coherence C and -settle step" in page


def test_each_readers_columns_lie_inside_the_records_contract():
    from cotdyn.methods.dynamics.profiles import RECORD_COLUMNS as PROFILE_READS

    assert set(ex.REQUIRED) <= set(RECORD_COLUMNS)
    assert set(PROFILE_READS) <= set(RECORD_COLUMNS)


def _settle_step(t, prefix_answers) -> float:
    """The first point from which the modal answer no longer changes (the maintainer's trial signal)."""
    modes = [majority(answer_classes(prefix_answers[k])) for k in t.points]
    if not modes:
        return float("nan")
    step = len(modes) - 1
    while step > 0 and modes[step - 1] == modes[-1]:
        step -= 1
    return float(step)


@pytest.fixture
def settle_step(monkeypatch):
    declared = signals.Signal(
        "settle_step", False, "-settle step", "-settle step", "#999933", (0, (3, 1)), derive=_settle_step
    )
    monkeypatch.setitem(signals.SIGNALS, "settle_step", declared)
    return declared


def test_a_signal_declared_once_reaches_records_ranking_and_page_but_no_registered_analysis(
    settle_step, data_dir, plan, tmp_path
):
    protocol = effective_protocol(plan)
    gsm8k = load_benchmark({"kind": "gsm8k", "path": data_dir / "gsm8k_test.jsonl"})
    _, chains, _, _, samples, _, _ = run_cell(gsm8k[:40], protocol, plan, "gsm8k")
    records = R.records_table(chains, samples, protocol, plan["exclusion"], "gsm8k", "c", signals=["settle_step"])
    kept = records[~records["excluded"]]
    assert kept["settle_step"].notna().all()
    assert ((kept["settle_step"] >= 0) & (kept["settle_step"] < kept["n_points"])).all()

    ranking = pd.DataFrame(ex.ranking_table(records, draws=5, seed=1))
    assert list(ranking["signal"]) == ["monotone", "violations", "final_entropy", "coherence", "settle_step"]
    row = ranking.set_index("signal").loc["settle_step"]
    assert row["roc_auc"] == pytest.approx(ex.roc_area(settle_step.score(ex.analyzed(records)), kept["correct"]))

    idx = np.tile(np.arange(len(kept)), (20, 1))
    secondary = selective_accuracy(records, 0.737, idx, 0.95)
    assert [r["signal"] for r in secondary] == ["monotone", "violations", "final_entropy", "coherence"]

    write_exploratory(records, tmp_path, m=protocol["m"], epsilon=protocol["epsilon"], seed=1, draws=5, resamples=20)
    assert "settle_step" in set(pd.read_csv(tmp_path / "ranking.csv")["signal"])
    assert "settle_step" in (tmp_path / TABLES_HTML).read_text()
