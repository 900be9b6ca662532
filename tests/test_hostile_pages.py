"""Pages never carry markup from data (issue 34): every payload a study folder can hold reaches the
written HTML as text, never as live markup, and a verdict edited on a page fails the audit."""

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

from cotdyn.plan.registration import PreregistrationError, read_registered, register
from cotdyn.report.header import header_html, report_header

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
RST = ".. raw:: html\n\n   <iframe src='file:///etc/passwd'></iframe>\n\n.. include:: /etc/passwd"

# (where the payload goes, the payload): each is placed in a plan check / hypotheses read by the header
PAYLOADS = [
    ("cell", SCRIPT + "`` `x <javascript:alert(1)>`_"),  # closes a literal the name was put in
    ("cell", IMG + "``:raw:`x`"),
    ("date", "2026-12-02' injected: `x <javascript:alert(1)>`_ <script>alert(1)</script>"),
    ("used", "javascript:alert(document.domain)"),
    ("used", "`click <javascript:alert(1)>`_ |sub| *x* [1]_"),
    ("reason", RST),
]


class Live(HTMLParser):
    """Tags, attributes and text of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def live_markup(page: str) -> list[str]:
    """What in a page could run or embed: script or iframe tags, event handlers, links or sources
    other than relative or http(s), the text of an included local file."""
    parsed = Live()
    parsed.feed(page)
    found = [t for t in parsed.tags if t in ("script", "iframe", "object", "embed", "img")]
    found += [k for k, _ in parsed.attrs if k.startswith("on")]
    found += [v for k, v in parsed.attrs if k in ("href", "src") and v and v.split(":")[0] not in ("http", "https")
              and ":" in v.split("/")[0]]  # fmt: skip
    return found + (["/etc/passwd content"] if "root:x:0:0" in page else [])


def page_text(page: str) -> str:
    parsed = Live()
    parsed.feed(page)
    return " ".join("".join(parsed.text).split())


def hostile_header(where: str, payload: str, **more: str) -> str:
    """A header page whose plan check carries ``payload`` at ``where`` (and each of ``more``)."""
    at = {where: payload, **more}
    cell = at.get("cell", "c1")
    deviation = {"cell": cell, "parameter": "m", "registered": 5, "used": at.get("used", 10),
                 "reason": at.get("reason", "r")}  # fmt: skip
    check = {
        "plan_sha256": "abc",
        "registered": {"date": at.get("date", "2026-12-02")},
        "cells": {cell: {"confirmatory": True, "deviations": [deviation, payload]}},
    }
    return report_header("registered", {"plan_sha256": "abc"}, check)


@pytest.mark.parametrize("where,payload", PAYLOADS)
def test_a_payload_reaches_the_header_page_as_text(where, payload):
    page = header_html(hostile_header(where, payload)).decode()
    assert live_markup(page) == []
    assert 'href="javascript' not in page.lower() and "<script" not in page and "<iframe" not in page
    # the payload is on the page as text (line breaks as spaces)
    assert " ".join(payload.split()) in page_text(page)
    assert 'class="system-message' not in page  # nothing in the data was read as a directive or a reference


def test_the_registered_results_page_escapes_audit_values():
    from cotdyn.report.pages import audit_files_html, integrity_html

    audit = {"ok": True, "counts": {SCRIPT: 1}, "files": [{"path": IMG, "status": "match", "detail": SCRIPT}],
             "problems": [], "manifest_sha256": SCRIPT, "check": "x"}  # fmt: skip
    page = integrity_html(audit, None) + audit_files_html(audit)
    assert live_markup(page) == [] and SCRIPT in page_text(page) and IMG in page_text(page)


def test_register_takes_an_iso_date_only_and_dumps_yaml(tmp_path):
    # plan v4's registration: its REGISTERED holds the hash and date alone (v5's also its power table)
    shutil.copy(ROOT / "preregistration/v4/plan.yaml", tmp_path / "plan.yaml")
    for date in ("2026-12-02' extra: 1", "2026-13-01", "tomorrow"):
        with pytest.raises(PreregistrationError, match="expected an ISO date"):
            register(tmp_path / "plan.yaml", tmp_path / "REGISTERED", date)
    assert not (tmp_path / "REGISTERED").exists()
    register(tmp_path / "plan.yaml", tmp_path / "REGISTERED", "2026-12-06")
    # the same bytes as the registered plan's own file, written by the same dumper
    assert (tmp_path / "REGISTERED").read_bytes() == (ROOT / "preregistration/v4/REGISTERED").read_bytes()
    assert read_registered(tmp_path / "REGISTERED")["date"] == "2026-12-06"


def snakemake_rst(path: Path, config: dict, params=None, wildcards=None) -> str:
    """A report caption or description rendered as snakemake --report does (jinja, then docutils
    with its defaults, raw HTML on)."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    class Snakemake:  # a caption's params and wildcards undefined unless given: its defaults apply
        pass

    Snakemake.params = params or SimpleNamespace()
    Snakemake.wildcards = wildcards or SimpleNamespace()
    Snakemake.config = config
    text = Environment().from_string(path.read_text()).render(snakemake=Snakemake)
    return publish_parts(text, writer_name="html")["html_body"]


def test_the_workflow_description_quotes_no_config_value():
    hostile = {"study": SCRIPT, "plan": RST + "\n" + IMG, "variants": {SCRIPT: {}}}
    page = snakemake_rst(ROOT / "workflow/report/workflow.rst", hostile)
    assert live_markup(page) == [] and "pwned" not in page and "passwd" not in page


def test_the_h2_caption_shows_its_absolute_values():
    page = snakemake_rst(ROOT / "workflow/report/h2_table.rst", {})
    assert "|rho_shape| - |rho_coherence|" in html.unescape(page_text(page)) and 'class="system-message' not in page


@pytest.mark.parametrize("caption", sorted(p.name for p in (ROOT / "workflow/report").glob("*.rst")))
def test_every_caption_renders_without_a_docutils_message(caption):
    """A `|name|` outside a literal is an RST substitution, which docutils reports as an error on
    the page (issue 37: the H2 caption's `|rho_shape|`); so is any other markup slip."""
    from cotdyn.protocol.signals import caption_list

    job = {"wildcards": SimpleNamespace(cell="sim-gsm8k", variant="registered")}
    job["params"] = SimpleNamespace(plan_sha256="0" * 64, signals=caption_list())
    page = snakemake_rst(ROOT / "workflow/report" / caption, {"study": "t", "plan": "plan.yaml"}, **job)
    assert 'class="system-message' not in page, page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium (Debian's chromium) not installed")
def test_headless_chromium_shows_the_payloads_as_text_and_runs_none(tmp_path):
    page = tmp_path / "header.html"
    # every payload that ran or embedded a file on 0a6cecf: a script, a javascript: link, an include
    hostile = hostile_header("reason", RST, cell=SCRIPT + IMG + "`` `x <javascript:alert(1)>`_",
                             used="javascript:alert(1)", date="2026-12-02 `y <javascript:alert(2)>`_")  # fmt: skip
    page.write_bytes(header_html(hostile))
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert "<body" in dom, "chromium wrote no DOM"
    # no script ran: the title is docutils' own and the body gained no attribute
    assert "<title>pwned</title>" not in dom and not re.search(r"<body[^>]*data-pwned", dom)
    assert "<script" not in dom and "<img" not in dom and "<iframe" not in dom and "root:x:0:0" not in dom
    assert live_markup(dom) == [] and 'href="javascript' not in dom.lower()
    assert SCRIPT in html.unescape(page_text(dom)) and ".. include:: /etc/passwd" in page_text(dom)


def test_a_verdict_flipped_on_a_page_fails_the_audit(small_simulated_study, tmp_path):
    from cotdyn.audit.check import audit

    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    shutil.copytree(small_simulated_study.root / "results", tmp_path / "results", symlinks=True)
    study = tmp_path / "results" / "t"
    untouched = audit(study)
    pages = {f.path: f for f in untouched.files if f.path.startswith("report/registered/")}
    assert untouched.ok, untouched.text()
    assert {p: f.status for p, f in pages.items() if p.endswith(".html")} == {
        "report/registered/header.html": "match", "report/registered/registered_results.html": "match"}  # fmt: skip
    page = study / "report/registered/registered_results.html"
    text = page.read_text()
    # the small study decides nothing (its verdicts are not_estimable): one is flipped to supported
    flip = 'class="not_estimable">not_estimable<'
    assert flip in text
    page.write_text(text.replace(flip, 'class="supported">supported<', 1))
    flipped = audit(study)
    assert not flipped.ok
    assert [f.status for f in flipped.files if f.path == "report/registered/registered_results.html"] == ["mismatch"]
    assert json.dumps(flipped.as_dict())  # the report serialises


@pytest.mark.parametrize(
    "folder,extra,message",
    [
        (
            "s",
            ["--protocol", 'm=!!python/object/apply:os.system ["true"]'],
            "--protocol m: the value is not plain YAML",
        ),
        ("s", ["--protocol", "m=[1"], "--protocol m: the value is not plain YAML"),
        ("s", ["--jsonl", "FOLDER"], "not a file"),
        ("a" * 300, [], "has 300 characters; at most 100"),
    ],
)
def test_cotdyn_init_names_malformed_input(tmp_path, capsys, folder, extra, message):
    from cotdyn.cli.main import main

    (tmp_path / "p.jsonl").write_text('{"question": "q", "gold": "1"}\n')
    extra = [str(tmp_path) if a == "FOLDER" else a for a in extra]
    args = ["init", str(tmp_path / folder), "--jsonl", str(tmp_path / "p.jsonl"), "--answer", "number"]
    args += ["--backend", "simulated", "--registered-plan", str(ROOT / "preregistration/plan.yaml"), *extra]
    assert main(args) == 1
    assert message in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["p.jsonl"]  # nothing written


def test_cotdyn_register_names_a_bad_date_and_a_missing_plan(tmp_path, capsys):
    from cotdyn.cli.main import main

    assert main(["register", "--plan", str(tmp_path / "none.yaml"), "--registered", str(tmp_path / "R"),
                 "--date", "2026-12-02"]) == 1  # fmt: skip
    assert "none.yaml" in capsys.readouterr().err
    assert main(["register", "--plan", str(ROOT / "preregistration/plan.yaml"), "--registered",
                 str(tmp_path / "R"), "--date", "2026-12-02'\nextra: 1"]) == 1  # fmt: skip
    assert "expected an ISO date" in capsys.readouterr().err and not (tmp_path / "R").exists()


# --- every other page the project writes: payloads from model output, ids, names and config values


def test_the_table_pages_escape_titles_names_and_cells():
    """The grading page, the exploratory and secondary tables and the sweeps page are all
    tables_html: a payload as the variant, the cell, a column or a value (model output) is text."""
    import pandas as pd

    from cotdyn.report.exploratory_tables import sweeps_html, tables_html
    from cotdyn.report.grading import grading_page

    text = pd.DataFrame({"text": [SCRIPT, IMG, RST], IMG: ["javascript:alert(1)", "a", "b"]})
    grading = {SCRIPT: {"parse_status": text, "disagreements": text, "graded_sample": text}}
    sweeps = pd.DataFrame({"variant": [SCRIPT, "registered"], "cell": [IMG, "c"], "delta": [0.5, 0.0]})
    no_sweep = sweeps_html(sweeps.assign(variant=SCRIPT), registered=SCRIPT)  # says so, naming the variant
    for page in (grading_page(grading, IMG), tables_html({SCRIPT: text}, IMG), sweeps_html(sweeps), no_sweep):
        assert live_markup(page) == [] and "<script" not in page and "<img" not in page
        assert SCRIPT in page_text(page) and (page is no_sweep or IMG in page_text(page))


def test_the_registered_results_page_escapes_cells_reasons_and_the_variant(result_with_payloads):
    from cotdyn.report.pages import registered_results_html

    page = registered_results_html(IMG, result_with_payloads, None, None).decode()
    assert live_markup(page) == [] and "<script" not in page and "<img" not in page
    assert page.count(SCRIPT) == 0 and SCRIPT in page_text(page) and IMG in page_text(page)


@pytest.fixture
def result_with_payloads():
    """A registered analysis of two simulated cells, one renamed to a payload, its reasons payloads."""
    from test_report_pages import PLAN_PATH, RUN

    from cotdyn.analysis import hypotheses
    from cotdyn.analysis.calibration import paper_panel, simulate_panel
    from cotdyn.plan.load import load_plan

    records = simulate_panel(paper_panel(scale=0.1), seed=3)
    analysed = hypotheses.analyze(records[records["cell"].isin(RUN)].reset_index(drop=True), load_plan(PLAN_PATH), "s")
    cells = analysed["cells"]
    first = next(iter(cells))
    cells[SCRIPT] = cells.pop(first)
    for value in cells[SCRIPT].values():
        if isinstance(value, dict) and "reason" in value:
            value["reason"] = IMG
    analysed["plan_version"] = SCRIPT
    return analysed


@pytest.mark.parametrize("answer", [r"$x^{$", r"$\frac{1$", "$5 and $6", "a" * 300])
def test_a_figure_draws_an_answer_with_dollar_signs_as_text(answer):
    """A model's answer is a legend label and a problem id part of a panel title: a '$' in them is
    drawn, never parsed as mathtext (which stopped the figure with a parse error)."""
    from matplotlib.cbook import is_math_text

    from cotdyn.files.writers import png_bytes
    from cotdyn.methods import dynamics as dyn
    from cotdyn.report.dynamics_plots import LABEL_CHARS, shortened, trajectory_figure

    states = ({answer: 0.5, "7": 0.5}, {answer: 1.0})
    trace = dyn.Trace("m-t", "m", "t", answer, (16, 32), states, 2, "7", False, 32.0)
    fig = trajectory_figure([trace])
    assert png_bytes(fig)  # drawn
    label = fig.axes[0].get_legend().get_texts()[0].get_text()
    assert label == shortened(answer) and not is_math_text(label)
    shown = label.replace(r"\$", "$")  # what matplotlib draws of a text that is not mathtext
    assert shown == answer or (len(answer) > LABEL_CHARS and shown.startswith(answer[:LABEL_CHARS])
                               and "cut to LABEL_CHARS = 60" in shown)  # fmt: skip
    assert not is_math_text(fig.axes[0].get_title())
