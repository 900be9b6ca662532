"""``snakemake --report`` over a study someone else wrote (issue 34): a config value that would be
markup in report.html is refused, named, before anything is read; payloads in the study's data
reach the report's pages as text. (Snakemake embeds every rule's input paths in a <script>
element unescaped: a plan at ``.../</script><img onerror=...>/plan.yaml`` ran script in the report.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml
from test_hostile_pages import IMG, RST, SCRIPT, live_markup, page_text

# a payload a path can carry: no '<name>' (Snakemake reads that as a path variable) but a script end
BREAKOUT = "y</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"


def hostile_config(config: dict, where: str, folder) -> dict:
    """The study's config with a payload at ``where``; a path payload names a real file (a copy)."""
    config = json.loads(json.dumps(config))
    payload_dir = folder / BREAKOUT
    payload_dir.mkdir(parents=True, exist_ok=True)
    if where == "plan":
        config["plan"] = str(shutil.copy(config["plan"], payload_dir / "plan.yaml"))
    elif where == "cache":
        config["cache"] = str(payload_dir / "cache")
    elif where == "benchmarks.gsm8k.path":
        config["benchmarks"]["gsm8k"]["path"] = str(shutil.copy(config["benchmarks"]["gsm8k"]["path"], payload_dir))
    elif where == "plan-newline":
        config["plan"] = config["plan"] + "\n" + RST
    elif where == "study":
        config["study"] = SCRIPT
    elif where == "variants":
        config["variants"] = {IMG: {}}
    elif where == "cells[0]":
        config["cells"] = [f"sim-{SCRIPT}"]
    return config


@pytest.mark.slow
@pytest.mark.parametrize(
    "where,field",
    [("plan", "plan"), ("cache", "cache"), ("benchmarks.gsm8k.path", "benchmarks.gsm8k.path"),
     ("plan-newline", "plan"), ("study", "study"), ("variants", "variants"), ("cells[0]", "cells[0]")],
)  # fmt: skip
def test_a_config_value_that_would_be_markup_is_refused_by_name(tmp_path, where, field):
    from test_workflow import _simulated_config, _write, snakemake

    config = hostile_config(_simulated_config(tmp_path), where, tmp_path)
    path = _write(tmp_path, config)
    built = snakemake("--report", "report.html", "--configfile", str(path), cwd=tmp_path)
    assert built.returncode != 0 and f"field {field}" in built.output, built.output[-3000:]
    assert "Traceback" not in built.output and not (tmp_path / "report.html").exists()


def test_payloads_in_the_study_reach_the_report_as_text(small_simulated_study, tmp_path):
    """A plan check and hypotheses edited to carry payloads (cell names, a deviation's used value,
    the registration date, a reason): snakemake --report re-renders the header and registered
    results pages from them, and report.html carries none as markup."""
    from test_report_pages import embedded_page
    from test_workflow import snakemake

    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    shutil.copytree(small_simulated_study.root, tmp_path, symlinks=True, dirs_exist_ok=True)
    study = tmp_path / "results" / "t"
    check_path = study / "checks/plan_check.json"
    check = json.loads(check_path.read_text())
    check.setdefault("registered", {})["date"] = "2026-12-02 `x <javascript:alert(1)>`_ " + SCRIPT
    deviation = {"cell": SCRIPT, "parameter": "m", "registered": 5, "used": "javascript:alert(1)", "reason": RST}
    check["cells"][SCRIPT + "``:raw:`x`"] = {"confirmatory": True, "deviations": [deviation, IMG, RST]}
    check_path.write_text(json.dumps(check))
    for hypotheses_path in study.glob("analysis/*/hypotheses.json"):  # every variant's page
        hypotheses = json.loads(hypotheses_path.read_text())
        hypotheses["plan_version"] = IMG
        hypotheses_path.write_text(json.dumps(hypotheses))
    config = yaml.safe_load(small_simulated_study.config.read_text())
    built = snakemake("--report", "report.html", "--configfile", str(tmp_path / small_simulated_study.config.name),
                      cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.output[-3000:]
    assert config["study"] == "t"
    report = (tmp_path / "report.html").read_text()
    # the pages are base64 data URIs: no payload stands in report.html's own markup
    for raw in (SCRIPT, IMG, "javascript:alert", ".. raw::", "root:x:0:0", "data-pwned"):
        assert raw not in report, raw
    header = embedded_page(tmp_path / "report.html", "header.html")
    results = embedded_page(tmp_path / "report.html", "registered_results.html")
    assert live_markup(header) == [] and live_markup(results) == []
    assert 'class="system-message' not in header
    text = page_text(header)
    assert SCRIPT in text and "javascript:alert(1)" in text and IMG in text and ".. include:: /etc/passwd" in text
    assert IMG in page_text(results)
    if shutil.which("chromium"):  # Debian's chromium: the report as a reviewer's browser runs it
        dom = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", (tmp_path / "report.html").as_uri()],
            capture_output=True, text=True, timeout=300,
        ).stdout  # fmt: skip
        assert "<body" in dom and "<title>Snakemake Report</title>" in dom, "chromium wrote no DOM"
        assert not re.search(r"<body[^>]*data-pwned", dom) and '<img src="x"' not in dom and "root:x:0:0" not in dom
