"""The report's rendered pages (cotdyn.report.pages, cotdyn.report.header) and the study's
integrity as they show it (cotdyn.provenance.integrity): verdict table, scope, audit status, tamper warning."""

import copy
import html
import json
import re
from pathlib import Path

import pytest

from cotdyn.analysis import hypotheses as hyp
from cotdyn.analysis.calibration import paper_panel, simulate_panel
from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.plan.load import load_plan
from cotdyn.provenance import integrity
from cotdyn.report import pages
from cotdyn.report.header import report_header

PLAN_PATH = Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml"
RUN = ("qwen7b-gsm8k", "qwen7b-math500")


@pytest.fixture(scope="module")
def result():
    """The registered analysis of a partial panel: the two anchor cells ran, six registered did not."""
    records = simulate_panel(paper_panel(scale=0.1), seed=3)
    return hyp.analyze(records[records["cell"].isin(RUN)].reset_index(drop=True), load_plan(PLAN_PATH), "sha")


def table(page: str, heading: str) -> list[list[str]]:
    """The rows (cell texts, row spans filled down) of the first table after ``heading``."""
    section = page[page.index(heading) :]
    body = section[section.index("<table>") : section.index("</table>")]
    rows, pending = [], {}  # column -> (text, rows still spanned)
    for tr in re.findall(r"<tr>(.*?)</tr>", body):
        cells = iter(re.findall(r"<t[hd]([^>]*)>(.*?)</t[hd]>", tr))
        row, column = [], 0
        while True:
            if column in pending:
                text, left = pending.pop(column)
                if left > 1:
                    pending[column] = (text, left - 1)
            else:
                attrs, content = next(cells, (None, None))
                if attrs is None:
                    break
                text = html.unescape(re.sub("<[^>]+>", "", content))
                span = re.search(r'rowspan="(\d+)"', attrs)
                if span:
                    pending[column] = (text, int(span.group(1)) - 1)
            row.append(text)
            column += 1
        rows.append(row)
    return rows


def test_scope_names_cells_run_and_absent(result):
    assert pages.cells_run(result) == list(RUN)
    absent = pages.cells_absent(result)
    assert len(absent) == 6 and not set(absent) & set(RUN)
    lines = dict(line.split(": ", 1) for line in pages.scope_lines(result))
    assert lines["H1"].startswith("all 2 registered cells ran")
    assert lines["H2"].startswith("2 of its 6 registered cells ran")
    assert lines["H4"].startswith("none of its 2 registered cells ran")


def test_verdict_table_holds_every_hypothesis_cell_with_holm_and_not_run(result):
    page = pages.registered_results_html("registered", result, None, None).decode()
    rows = table(page, "Verdicts (H1-H5)")
    header, rows = rows[0], rows[1:]
    assert header[:8] == ["hypothesis", "verdict", "criterion", "cell", "cell verdict", "estimate", "95% CI", "Holm"]
    ran = set(RUN)
    expected = [(h, c) for h, v in result["verdicts"].items() if ran & set(v["cells"]) for c in v["cells"]]
    assert [(r[0], r[3].removesuffix(" (not run)")) for r in rows if not r[3].startswith("none of")] == expected
    for r in rows:
        v = result["verdicts"][r[0]]
        if r[3].startswith("none of"):  # a hypothesis none of whose cells ran: one row naming them all
            assert not ran & set(v["cells"]) and r[3].endswith(", ".join(v["cells"])) and r[6] == "not estimable"
            continue
        assert r[1] == v["verdict"] and r[4] == v["cells"][r[3].removesuffix(" (not run)")]["verdict"]
        assert r[3].endswith("(not run)") == (r[3].split(" ")[0] not in RUN)
    assert [r[0] for r in rows if r[3].startswith("none of")] == [
        "H1-replication",
        "H4",
    ]  # Mistral and Llama, and the distilled cells, did not run
    h1 = next(r for r in rows if r[:1] == ["H1"] and r[3] == "qwen7b-gsm8k")
    holm = next(m for m in result["holm"] if m["id"] == "H1" and m["cell"] == "qwen7b-gsm8k")
    assert h1[7].startswith("rejected" if holm["reject"] else "not rejected")
    ci = result["cells"]["qwen7b-gsm8k"]["H1"]["ci"]
    assert h1[6] == f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"
    panel = table(page, "Panel (seed 003")
    assert panel[0][:4] == ["cell", "role", "n analysed", "n total"]
    by_cell = {r[0]: r for r in panel[1:]}
    assert by_cell["mistral7b-gsm8k"][-1] == "not run" and by_cell["mistral7b-gsm8k"][2] == ""
    h1_block = result["cells"]["qwen7b-gsm8k"]["H1"]
    assert by_cell["qwen7b-gsm8k"][2:4] == [str(h1_block["n"]), str(h1_block["n"] + h1_block["n_excluded"])]
    assert [r[:2] for r in table(page, "Holm family")[1:]] == [[m["id"], m["cell"]] for m in result["holm"]]


def test_the_holm_row_of_a_not_estimable_cell_gives_its_reason_not_a_decision(result):
    """issue 53: the Holm table showed H3's p and a decision where H3 read not_estimable on the page."""
    import copy

    from cotdyn.report.pages import holm_rows

    changed = copy.deepcopy(result)
    block = changed["verdicts"]["H3"]["cells"]["qwen7b-gsm8k"]
    block.update(verdict="not_estimable", reason="a test's reason")
    rows = {(r["hypothesis"], r["cell"]): r for r in holm_rows(changed)}
    row = rows[("H3", "qwen7b-gsm8k")]
    assert row["decision"] == "none: H3 is not_estimable in this cell" and row["reason"] == "a test's reason"
    assert row["value"] == rows_before(result)[("H3", "qwen7b-gsm8k")]["value"]  # the p-value itself is shown
    assert rows[("H1", "qwen7b-gsm8k")]["decision"] in ("rejected", "not rejected")


def rows_before(result: dict) -> dict:
    from cotdyn.report.pages import holm_rows

    return {(r["hypothesis"], r["cell"]): r for r in holm_rows(result)}


def test_verdict_fields_are_read_generically(result):
    """Verdicts with fields and values this module does not know (a per-cell CI criterion, a Holm
    decision, an 'imprecise' verdict) are shown as they are."""
    changed = copy.deepcopy(result)
    block = changed["verdicts"]["H1"]["cells"]["qwen7b-gsm8k"]
    block.update(verdict="imprecise", ci_criterion="ci_lower_above 0.0: not met", holm_reject=False)
    changed["verdicts"]["H1"]["verdict"] = "estimated"
    rows = table(pages.registered_results_html("registered", changed, None, None).decode(), "Verdicts")
    h1 = next(r for r in rows if r[0] == "H1" and r[3] == "qwen7b-gsm8k")
    assert h1[1] == "estimated" and h1[4] == "imprecise" and h1[7] == "not rejected"
    assert "ci_criterion: ci_lower_above 0.0: not met" in h1[-1]


@pytest.mark.parametrize(
    "block,details",
    [
        # the CI criterion that is the verdict, a full bootstrap, no flags, the Holm decision: all said elsewhere
        (
            {"verdict": "supported", "ci_criterion": "supported", "ci_n_kept": 1000, "flags": [], "holm_reject": True},
            "",
        ),
        ({"verdict": "not_supported", "ci_criterion": "supported", "holm_reject": False}, "ci_criterion: supported"),
        (
            {
                "verdict": "imprecise",
                "ci_n_kept": 871,
                "flags": ["kept 871 of 1000 resamples", "imprecise: 12 monotone"],
            },
            "ci_n_kept: 871; flags: kept 871 of 1000 resamples; imprecise: 12 monotone",
        ),
        # a cell that never ran kept no resamples and has no interval: nothing to add to "not estimable"
        ({"verdict": "not_estimable", "ci": [None, None], "ci_n_kept": 0, "ci_criterion": "not_estimable"}, ""),
        (
            {"verdict": "estimated", "group_sizes": {"monotone": 3, "not": 40}},
            'group_sizes: {"monotone": 3, "not": 40}',
        ),
    ],
)
def test_the_details_column_shows_only_what_no_other_column_says(block, details):
    assert pages.details_text(block, resamples=1000) == details


def test_a_degenerate_interval_is_not_shown_as_precise():
    assert pages.interval([None, None]) == "not estimable"
    assert pages.interval([0.0, 0.0], "gap_pp").startswith("zero width at +0.00: constant outcome")
    assert pages.interval([-1.5, 2.25], "gap_pp") == "[-1.50, +2.25]"


def _study(tmp_path: Path) -> Path:
    study = tmp_path / "study"
    for name, text in {"a.csv": "x\n1\n", "cells/c/samples.parquet": "samples"}.items():
        (study / name).parent.mkdir(parents=True, exist_ok=True)
        (study / name).write_text(text)
    listed = {p: integrity.file_sha256(study / p) for p in ("a.csv", "cells/c/samples.parquet")}
    (study / STUDY_MANIFEST).parent.mkdir(parents=True)
    (study / STUDY_MANIFEST).write_text(json.dumps({"files": listed}))
    return study


def test_stored_check_finds_a_tampered_and_a_missing_file(tmp_path):
    study = _study(tmp_path)
    clean = integrity.stored_check(study)
    assert clean["ok"] and clean["counts"]["match"] == 2 and integrity.warning_text({**clean}, clean) is None
    assert clean["manifest_sha256"] == integrity.file_sha256(study / STUDY_MANIFEST)
    (study / "cells/c/samples.parquet").write_text("edited")
    (study / "a.csv").unlink()
    (study / "report").mkdir()
    (study / "report" / "page.html").write_text("written after the manifest: not checked")
    check = integrity.stored_check(study)
    assert not check["ok"] and check["counts"] == {"match": 0, "mismatch": 1, "missing": 1, "unlisted": 0, "extra": 0}
    warning = integrity.warning_text(clean, check)
    assert "mismatch: cells/c/samples.parquet" in warning and "missing: a.csv" in warning


def test_pages_show_the_audit_status_and_the_tamper_warning(tmp_path, result):
    study = _study(tmp_path)
    audit = integrity.stored_check(study) | {"check": "audit"}
    page = pages.registered_results_html("registered", result, audit, integrity.stored_check(study)).decode()
    assert 'id="audit-status">Audit after the run: <strong>PASS' in page and "integrity-warning" not in page
    assert audit["manifest_sha256"] in page
    (study / "cells/c/samples.parquet").write_text("edited")
    tampered = integrity.stored_check(study)
    page = pages.registered_results_html("registered", result, audit, tampered).decode()
    warning = page[page.index('id="integrity-warning"') :]
    assert "mismatch: cells/c/samples.parquet" in warning[: warning.index("</div>")]
    header = report_header("registered", result | {"plan_sha256": "sha"}, {"cells": {}}, audit, tampered)
    assert ".. warning::" in header and "mismatch: cells/c/samples.parquet" in header
    # the audit passed when it ran, but the files changed since: no page shows PASS beside the warning
    assert "PASS" not in header and "Audit after the run: **FAIL (it passed when it ran" in header
    assert "PASS" not in page and 'class="warning" id="audit-status">Audit after the run: <strong>FAIL' in page
    not_run = next(line for line in header.splitlines() if line.startswith("Registered cells not run:"))
    assert all(f"``{c}``" in not_run for c in pages.cells_absent(result)) and "qwen7b" not in not_run


def test_a_page_without_an_audit_says_so(result):
    page = pages.registered_results_html("registered", result, None, None).decode()
    assert "the audit has not run for this study" in page and 'id="audit-status"' not in page


def embedded_page(report: Path, name: str) -> str:
    """An HTML page as a Snakemake report embeds it (a base64 data URI)."""
    import base64

    text = report.read_text()
    entry = text[text.index(f'/{name}": {{') :]
    uri = entry[entry.index('"data_uri": "') + len('"data_uri": "') :]
    return base64.b64decode(uri[: uri.index('"')].split(",", 1)[1]).decode()


def test_a_report_over_a_tampered_study_warns_on_the_page_and_the_console(small_simulated_study, tmp_path):
    """Over the shared small study (conftest: one unregistered cell, three variants, a misbehaving
    model), in place of an 8-problem run of its own: its registered variant's pages are the ones
    checked, and the tampering is done on a copy, which no other test reads."""
    import shutil

    import pandas as pd
    from test_workflow import snakemake

    run = small_simulated_study.run
    assert run.returncode == 0, run.output[-3000:]
    # copy2 keeps modification times, and .snakemake/ comes along: the copy is as up to date as the original
    shutil.copytree(small_simulated_study.root, tmp_path, symlinks=True, dirs_exist_ok=True)
    path = tmp_path / small_simulated_study.config.name
    study = tmp_path / "results" / "t"
    page = (study / "report/registered/registered_results.html").read_text()
    assert "Audit after the run: <strong>PASS" in page and "integrity-warning" not in page
    rows = table(page, "Verdicts")[1:]  # its one cell is no registered cell: each hypothesis has one row
    assert [r[0] for r in rows] == ["H1", "H1-replication", "H2", "H3", "H4", "H5"] and all(
        r[3].startswith("none of") for r in rows
    )
    samples = study / "cells/sim-gsm8k/registered/samples.parquet"
    frame = pd.read_parquet(samples)
    frame.loc[0, "text"] = "The answer is 41."
    frame.to_parquet(samples)
    built = snakemake("--report", "report.html", "--configfile", str(path), cwd=tmp_path)
    assert built.returncode == 0, built.output[-3000:]
    line = "mismatch: cells/sim-gsm8k/registered/samples.parquet"
    assert "no longer matched the study manifest" in built.output and line in built.output
    for name in ("registered_results.html", "header.html"):
        embedded = embedded_page(tmp_path / "report.html", name)
        assert "no longer matched the study manifest" in embedded and line in embedded, name


def test_the_forest_plot_leaves_out_cells_not_run_and_never_draws_a_zero_width_interval(result):
    from cotdyn.analysis.hypotheses.outputs import forest_figure, forest_rows

    changed = copy.deepcopy(result)
    changed["cells"]["qwen7b-math500"]["H1"].update(gap_pp=0.0, ci=[0.0, 0.0])  # accuracy 0 in both groups
    rows, not_run = forest_rows(changed)
    assert not_run == pages.cells_absent(result) and [r["label"] for r in rows] == list(RUN)
    gsm8k, math500 = rows
    lo, hi = result["cells"]["qwen7b-gsm8k"]["H1"]["ci"]
    assert gsm8k["ci"] == (lo, hi) and gsm8k["status"] == f"95% CI {'excludes' if lo > 0 or hi < 0 else 'includes'} 0"
    assert math500["gap"] is None and math500["status"] == "not estimable (zero-width interval: constant outcome)"
    fig = forest_figure(changed)
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_legend() is not None
    texts = [t.get_text() for t in ax.texts] + [t.get_text() for t in fig.texts]
    assert math500["status"] in texts and any(t.startswith("not run, left out: ") for t in texts)
    assert min(t.get_fontsize() for t in ax.texts + fig.texts + ax.get_legend().get_texts()) >= 8


def test_figures_keep_coinciding_curves_apart_and_say_when_there_is_nothing_to_draw():
    import pandas as pd
    from factories import records_frame

    from cotdyn.report import dynamics_plots, figures

    records = records_frame(
        excluded=[False] * 4 + [True] * 2, correct=[True, False, True, True, False, False],
        monotone=[True, True, False, False, True, True], violations=[0, 0, 1, 2, 0, 0],
        coherence=[0.5, 0.1, 0.2, 0.3, 0.0, 0.0], final_entropy=[0.0, 0.5, 0.7, 0.2, 1.0, 1.0],
    )  # fmt: skip
    lines = figures.risk_coverage_figure(records, draws=5, seed=1).axes[0].get_lines()[:4]
    assert len({str(line._dash_pattern) for line in lines}) == 4  # matplotlib keeps the dashes there only
    ax = figures.risk_coverage_figure(records, draws=5, seed=1).axes[0]
    assert min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 8
    blank = figures.violation_bucket_figure(records.assign(excluded=True)).axes[0]
    assert blank.get_title() and any(t.get_text().startswith("nothing to draw") for t in blank.texts)
    empty = pd.DataFrame(columns=["rmse_lo", "rmse_hi", "rmse_mid", *(c for c, _ in dynamics_plots.DISAGREEMENTS)])
    bins = pd.DataFrame({"rmse_lo": [0.0, 0.01], "rmse_hi": [0.0, 0.02], "rmse_mid": [0.0, 0.015]})
    no_pairs = bins.assign(**{c: float("nan") for c, _ in dynamics_plots.DISAGREEMENTS})  # bins without pairs
    for curve in (empty, no_pairs):
        ax = dynamics_plots.disagreement_figure(curve).axes[0]
        assert ax.get_title() and [t.get_text() for t in ax.texts] == ["nothing to draw: no pairs of chains to compare"]


def test_refresh_for_report_rewrites_the_pages_only_when_the_integrity_changes(tmp_path, result):
    from cotdyn.files.layout import AUDIT_RESULT, PLAN_CHECK, analysis_file, report_page

    study = _study(tmp_path)
    (study / analysis_file("registered", "hypotheses.json")).parent.mkdir(parents=True)
    (study / analysis_file("registered", "hypotheses.json")).write_text(json.dumps(result | {"plan_sha256": "sha"}))
    (study / PLAN_CHECK).parent.mkdir(parents=True)
    (study / PLAN_CHECK).write_text(json.dumps({"cells": {}}))
    (study / AUDIT_RESULT).parent.mkdir(parents=True)
    (study / AUDIT_RESULT).write_text(json.dumps(integrity.stored_check(study) | {"check": "audit"}))
    pages_ = [study / report_page("registered", name) for name in ("header.html", "registered_results.html")]
    assert pages.refresh_for_report(study, ["registered", "absent-variant"]) is None
    first = [p.read_bytes() for p in pages_]
    stamps = [p.stat().st_mtime_ns for p in pages_]
    assert pages.refresh_for_report(study, ["registered"]) is None
    assert [p.read_bytes() for p in pages_] == first and [p.stat().st_mtime_ns for p in pages_] == stamps
    original = (study / "a.csv").read_text()
    (study / "a.csv").write_text("tampered\n")
    warning = pages.refresh_for_report(study, ["registered"])
    assert "mismatch: a.csv" in warning and all(b"mismatch: a.csv" in p.read_bytes() for p in pages_)
    (study / "a.csv").write_text(original)
    assert pages.refresh_for_report(study, ["registered"]) is None
    assert [p.read_bytes() for p in pages_] == first


def test_the_sweep_table_keeps_n_total_and_n_analysed_apart_and_says_when_nothing_was_swept():
    import pandas as pd

    from cotdyn.analysis import exploratory as ex
    from cotdyn.report.exploratory_tables import sweeps_html

    summary = {"n": 6, "n_analyzed": 5, "n_excluded": 1, "accuracy": 0.4, "gap_pp": 10.0}
    rows = ex.sweep_table({"registered": {"c": summary}, "m10": {"c": summary | {"n_analyzed": 4, "n_excluded": 2}}})
    assert [(r["n"], r["n_analyzed"], r["n_excluded"], r["delta_n_analyzed"]) for r in rows] == [
        (6, 5, 1, 0.0),
        (6, 4, 2, -1.0),
    ]
    assert "<td>4</td>" in sweeps_html(pd.DataFrame(rows)) and "n_analyzed" in sweeps_html(pd.DataFrame(rows))
    alone = sweeps_html(pd.DataFrame(rows[:1]))
    assert "runs no sweep variant" in alone and "<table" not in alone


def test_the_report_sections_are_numbered_without_a_gap_and_the_optional_one_comes_last():
    """issue 53: `snakemake --report`'s sidebar skipped section 5 (information gain, which only the
    config's `infogain.traces` writes, sat between dynamics and grading)."""
    import re

    root = Path(__file__).resolve().parents[1]
    categories = set()
    # the rules' report() calls, and the report items cotdyn.workflow builds for them
    for source in [*(root / "workflow" / "rules").glob("*.smk"), *(root / "src" / "cotdyn" / "workflow").glob("*.py")]:
        categories |= set(re.findall(r'category"?\s*[=:]\s*"(\d+)\. ([^"]+)"', source.read_text()))
    numbered = sorted((int(n), name) for n, name in categories)
    assert [n for n, _ in numbered] == list(range(len(numbered))), numbered
    # every section but the last is written by every study (files.layout.study_targets)
    assert numbered[-1][1] == "Information gain"
