"""``cotdyn ls`` (issue 50; issue 53 item 6): the backends, benchmarks, signals and registered plans,
each with the package it comes from (tests/test_plugins.py lists a lab's backend with its package)."""

from __future__ import annotations

import json
import shutil

from conftest import ROOT

from cotdyn import plugins
from cotdyn.cli.main import main as cotdyn_main
from cotdyn.grading.registry import REGISTRY as BENCHMARKS
from cotdyn.plan.load import plan_sha256
from cotdyn.protocol.signals import SIGNALS

OWN = f"cotdyn {plugins.installed_version('cotdyn')}"


def ls(capsys, *words) -> str:
    assert cotdyn_main(["ls", *words]) == 0
    return capsys.readouterr().out


def section(text: str, kind: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{kind} ("))
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        rows.append(line)
    assert lines[start] == f"{kind} ({len(rows)})"
    return rows


def test_it_lists_every_kind_with_the_package_each_comes_from(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = ls(capsys)
    # cotdyn's own (a lab's plugins installed beside them are listed too, and are not this test's)
    backends = {line.split()[0]: line for line in section(out, "backends") if f" {OWN} " in line}
    assert list(backends) == ["simulated", "transformers", "vllm", "openai_compat"]
    assert (
        "runs in generate-cpu|generate-cuda; takes device, dtype; requires torch>=2.13,<2.14 ("
        in backends["transformers"]
    )
    assert "runs in generate-vllm; takes dtype; requires vllm>=0.26.0,<0.33 (" in backends["vllm"]
    assert backends["simulated"].endswith(
        "runs in generate-cpu; takes no device or dtype; requires nothing beyond cotdyn"
    )
    benchmarks = section(out, "benchmarks")
    assert [line.split()[0] for line in benchmarks] == list(BENCHMARKS)
    assert f"  {'gsm8k':<16} {OWN:<20} answer: number" in benchmarks
    signals = section(out, "signals")
    assert [line.split()[0] for line in signals] == list(SIGNALS)
    assert f"  {'monotone':<16} {OWN:<20} read by registered analyses" in signals
    plans = section(out, "plans")
    assert [line.split()[:2] for line in plans] == [
        ["v1", "preregistration/v1/plan.yaml"],
        ["v2", "preregistration/v2/plan.yaml"],
        ["v3", "preregistration/v3/plan.yaml"],
        ["v4", "preregistration/v4/plan.yaml"],
        ["v5", "preregistration/plan.yaml"],
    ]
    v5 = plans[-1]
    assert f"sha256 {plan_sha256(ROOT / 'preregistration' / 'plan.yaml')} (matches), registered 2026-12-07" in v5


def test_json_by_kind_and_a_plan_that_differs_from_its_registration(tmp_path, capsys):
    folder = tmp_path / "prereg"
    shutil.copytree(ROOT / "preregistration" / "v1", folder / "v1")
    (folder / "v1" / "plan.yaml").write_text((folder / "v1" / "plan.yaml").read_text() + "# edited\n")
    (folder / "v2").mkdir()
    (folder / "v2" / "plan.yaml").write_text("plan_version: 2\n")  # not registered
    listed = json.loads(ls(capsys, "plans", "signals", "--json", "--preregistration", str(folder)))
    assert list(listed) == ["plans", "signals"]
    first, second = listed["plans"]
    assert first["plan_version"] == 1 and first["matches"] is False and first["date"] == "2026-11-30"
    assert second == {
        "path": str(folder / "v2" / "plan.yaml"),
        "plan_version": 2,
        "sha256": None,
        "date": None,
        "matches": None,
        "error": f"{folder / 'v2' / 'REGISTERED'} not found: the plan has not been registered",
    }
    text = ls(capsys, "plans", "--preregistration", str(folder))
    assert "(DIFFERS from the file), registered 2026-11-30" in text
    assert "not found: the plan has not been registered" in text


def test_an_unknown_kind_is_one_line(capsys):
    assert cotdyn_main(["ls", "tasks"]) == 2
    assert capsys.readouterr().err == (
        "error: cotdyn ls tasks: not a kind (known: backends, benchmarks, signals, plans)\n"
    )


def test_a_name_cannot_forge_a_line(tmp_path, capsys):
    folder = tmp_path / "p\nv9   forged"
    folder.mkdir()
    (folder / "plan.yaml").write_text("plan_version: 9\n")
    text = ls(capsys, "plans", "--preregistration", str(folder))
    assert text.count("\n") == 2 and "\\n" in text  # the header and one row: the newline is escaped


def test_a_benchmark_or_signal_plugin_that_failed_is_listed_with_its_error(monkeypatch, capsys):
    from cotdyn.grading import registry as benchmark_registry
    from cotdyn.protocol import signals

    failed = plugins.PluginError("cotdyn.signals plugin 'odd' from odd-signals 1.0 failed to load (odd:S): boom")
    monkeypatch.setitem(signals.BROKEN, "odd", failed)
    monkeypatch.setitem(benchmark_registry.BROKEN, "bad", plugins.PluginError("bad: failed"))
    out = ls(capsys, "benchmarks", "signals")
    assert f"  {'odd':<16} BROKEN: {failed}" in section(out, "signals")
    assert f"  {'bad':<16} BROKEN: bad: failed" in section(out, "benchmarks")
