"""Whatever the reviewer opens is re-derived or refused (issue 52 item 3).

Every page cotdyn writes carries a Content-Security-Policy first in its head (cotdyn.report.csp),
so nothing planted in it runs or sends a request, alone or embedded as report.html embeds it
(an iframe of a data URL); headless Chromium checks that against a local server. A page the
audit does not re-render is refused, and one planted where a page of the project lies differs
from its re-rendering: the audit fails it, and ``snakemake --report`` refuses to embed it.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from cotdyn.report.csp import META, carries_policy, unguarded_pages, with_policy
from cotdyn.report.exploratory_tables import tables_html
from cotdyn.report.header import header_html

CHROMIUM = shutil.which("chromium")
NO_CHROMIUM = "headless Chromium (Debian's chromium: apt-get install -y chromium) not installed"


def planted(port: int) -> str:
    """A script and an image that each send a request to the test's server when they run or load."""
    return (
        f"<script>fetch('http://127.0.0.1:{port}/fetch');new Image().src='http://127.0.0.1:{port}/js-img'</script>"
        f"<img src='http://127.0.0.1:{port}/img'><link rel=stylesheet href='http://127.0.0.1:{port}/css'>"
    )


class Listener:
    """A local HTTP server that records the path of every request it gets."""

    def __init__(self):
        self.paths: list[str] = []
        paths = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                paths.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def open_in_chromium(page: Path) -> str:
    """The page's DOM after headless Chromium has loaded it (and run what it was allowed to)."""
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=3000", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert "<body" in dom, "chromium wrote no DOM"
    return dom


def framed(page: str) -> str:
    """A page inside an iframe of a data URL, as snakemake --report's report.html embeds it."""
    uri = "data:text/html;charset=utf-8;base64," + base64.b64encode(page.encode()).decode()
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><iframe src='{uri}'></iframe></body></html>"


def pages_with_payload(port: int) -> dict[str, str]:
    """Each kind of page cotdyn writes (a table page, the docutils header), with a planted payload
    inserted in its body as an edit of the file would."""
    table = tables_html({"t": pd.DataFrame({"x": [1.0]})}, "Grading")
    header = header_html("Header\n======\n\ntext").decode()
    return {name: page.replace("</body>", planted(port) + "</body>", 1) for name, page in
            (("tables", table), ("header", header))}  # fmt: skip


def test_every_page_writer_puts_the_policy_first_in_the_head():
    table = tables_html({"t": pd.DataFrame({"x": [1.0]})}, "T").encode()
    header = header_html("Header\n======\n\ntext")
    assert carries_policy(table) and carries_policy(header)
    for page in (table, header):  # nothing but doctype, html, head and charset before it
        assert page.index(META.encode()) < page.index(b"<title>")
    # a script before the policy, or a page without it, does not carry it
    assert not carries_policy(table.replace(b"<head>", b"<head><script>x()</script>", 1))
    assert not carries_policy(table.replace(META.encode(), b"", 1))
    assert carries_policy(with_policy("<!DOCTYPE html><html><head><meta charset='utf-8'></head></html>").encode())


def test_every_page_of_a_study_carries_the_policy(small_simulated_study):
    """Grading, exploratory, secondary, generations, sweeps, header, registered results: all of them."""
    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    study = small_simulated_study.root / "results" / "t"
    pages = sorted(p.relative_to(study).as_posix() for p in study.rglob("*.html"))
    expected = {"report/grading/grading.html", "analysis/sweeps.html", "analysis/registered/exploratory/tables.html",
                "report/registered/header.html", "report/registered/registered_results.html"}  # fmt: skip
    assert expected <= set(pages), pages
    assert unguarded_pages(study) == []


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
@pytest.mark.parametrize("embedded", [False, True], ids=["opened", "embedded-as-report.html-does"])
def test_a_payload_in_a_page_with_the_policy_runs_nothing_in_headless_chromium(tmp_path, embedded):
    """The payload sends requests from a page without the policy (the check can see them), and
    none from the same page with it: no script, no image, no stylesheet off the page."""
    with Listener() as server:
        for name, page in pages_with_payload(server.port).items():
            bare = page.replace(META, "", 1)
            for label, text in (("with", page), ("without", bare)):
                path = tmp_path / f"{name}-{label}.html"
                path.write_text(framed(text) if embedded else text)
                before = len(server.paths)
                open_in_chromium(path)
                got = server.paths[before:]
                if label == "with":
                    assert got == [], f"{name} page with the policy sent {got}"
                else:
                    assert got, f"{name} page without the policy sent nothing: the check sees no request"


def copied_study(small_simulated_study, tmp_path) -> Path:
    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    shutil.copytree(small_simulated_study.root / "results", tmp_path / "results", symlinks=True)
    return tmp_path / "results" / "t"


def test_a_script_planted_in_the_grading_page_fails_the_audit(small_simulated_study, tmp_path):
    """The finding: on d9a9ee3 such a page passed, "not vouched for"."""
    from cotdyn.audit.check import audit

    study = copied_study(small_simulated_study, tmp_path)
    page = study / "report/grading/grading.html"
    untouched = audit(study)
    assert untouched.ok, untouched.text()
    grading = {f.path: (f.status, f.detail) for f in untouched.files if f.path.startswith("report/grading/")}
    assert grading and all(s == "match" and "re-derived" in d for s, d in grading.values()), grading
    page.write_text(page.read_text().replace("</body>", "<script>fetch('http://127.0.0.1:9/')</script></body>"))
    planted_page = audit(study)
    assert not planted_page.ok
    [check] = [f for f in planted_page.files if f.path == "report/grading/grading.html"]
    assert check.status == "mismatch" and "re-derived" in check.detail


PLANTED = ["report/grading/extra.html", "report/registered/notes.svg", "analysis/x.html"]


@pytest.fixture(scope="module")
def planted_audit(small_simulated_study, tmp_path_factory):
    """The audit of one copy of the study with a page planted at each place of PLANTED (each file is
    checked on its own: a planted file is no other file's input)."""
    from cotdyn.audit.check import audit

    study = copied_study(small_simulated_study, tmp_path_factory.mktemp("planted"))
    for where in PLANTED:
        (study / where).write_text("<html><body><script>fetch('http://127.0.0.1:9/')</script></body></html>")
    return audit(study)


@pytest.mark.parametrize("where", PLANTED)
def test_a_page_the_project_does_not_write_fails_the_audit(planted_audit, where):
    """Under report/ it is refused as a page; in a folder only the DAG writes it is also a file
    no rule writes (cotdyn.audit.expected's "extra"), which fails first."""
    from cotdyn.audit.pages import REFUSED_PAGE

    report = planted_audit
    assert not report.ok
    [check] = [f for f in report.files if f.path == where]
    assert (check.status, check.detail) == ("mismatch", REFUSED_PAGE) or check.status == "extra", check
    assert check in report.failures


EDITS = [
    "analysis/registered/exploratory/tables.html",
    "analysis/registered/exploratory/ranking.csv",
    "analysis/sweeps.html",
    "analysis/sweeps.csv",
    "analysis/registered/math_shepherd.csv",
    "analysis/registered/secondary/tables.html",
    "analysis/generations/tables.html",
    "analysis/registered/dynamics/profiles.csv",
]


@pytest.fixture(scope="module")
def edited_audit(small_simulated_study, tmp_path_factory):
    """The audit of one copy of the study with every file of EDITS edited and re-hashed in the
    manifest: each derived file is re-derived from the stored raw data, never from another derived
    file, so each edit is found on its own, as with one edit a copy."""
    import json

    from cotdyn.audit.check import audit
    from cotdyn.files.layout import STUDY_MANIFEST
    from cotdyn.provenance.manifests import file_sha256

    study = copied_study(small_simulated_study, tmp_path_factory.mktemp("edited"))
    manifest = json.loads((study / STUDY_MANIFEST).read_text())
    for path in EDITS:
        target = study / path
        assert target.exists(), sorted(p.name for p in target.parent.iterdir())
        text = target.read_text()
        edited = (
            text.replace("</body>", "<p>edited</p></body>") if path.endswith(".html") else text.replace("0", "1", 3)
        )
        assert edited != text
        target.write_text(edited)
        manifest["files"][path] = file_sha256(target)
    (study / STUDY_MANIFEST).write_text(json.dumps(manifest))
    return audit(study)


@pytest.mark.parametrize("path", EDITS)
def test_an_output_edited_and_rehashed_in_the_manifest_fails_its_rederivation(edited_audit, path):
    """The finding: on d9a9ee3 the exploratory tables, sweeps and Math-Shepherd labels were checked
    against the manifest's hash only, so an edit re-hashed there passed."""
    report = edited_audit
    assert not report.ok
    [check] = [f for f in report.files if f.path == path]
    assert check.status == "mismatch" and "re-derived" in check.detail, check


def test_snakemake_report_refuses_a_page_without_the_policy(small_simulated_study, tmp_path):
    from test_workflow import snakemake

    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    root = tmp_path / "w"
    shutil.copytree(small_simulated_study.root, root, symlinks=True)
    page = root / "results/t/report/grading/grading.html"
    page.write_text(page.read_text().replace(META, "", 1))
    config = root / small_simulated_study.config.name
    built = snakemake("--report", "report.html", "--configfile", str(config), cwd=root)
    assert built.returncode != 0 and "report/grading/grading.html" in built.output, built.output[-3000:]
    assert "Content-Security-Policy" in built.output and "Traceback" not in built.output
    assert not (root / "report.html").exists()


def test_what_the_audit_cannot_vouch_for_is_listed_once_counted_and_outside_the_pass(small_simulated_study, tmp_path):
    from cotdyn.audit.check import audit

    study = copied_study(small_simulated_study, tmp_path)
    (study / "report" / "notes.txt").write_text("a note the audit cannot vouch for\n")
    text = audit(study).text()
    lines = text.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("audit of "))
    assert "PASS" in lines[verdict] and "notes.txt" not in lines[verdict]
    assert "  outside this PASS: 2 file(s) not vouched for, listed last" in lines  # notes.txt and audit.json
    heading = lines.index("  not vouched for, 2 file(s) the audit neither re-derives nor compares:")
    assert [line.split()[0] for line in lines[heading + 1 :]] == ["report/audit.json", "report/notes.txt"]
    assert sum("report/notes.txt" in line for line in lines) == 1
