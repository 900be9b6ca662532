"""Plugins a lab can trust (issue 65): a refused plugin or a missing declared dependency is named at
the first command (``cotdyn init``, the dry run, the audit), with its package and the fix, never as
argparse's "invalid choice", a schema's "Additional properties are not allowed" or a traceback."""

from __future__ import annotations

import importlib
import re
import sys

import pytest
from conftest import DATA, ROOT
from lab_plugins import BACKEND_MODULE, SIGNAL_MODULE, distribution
from test_workflow_logic import simulated, study_of

from cotdyn.cli.main import main as cotdyn_main
from cotdyn.generation.backends import registry as backends
from cotdyn.grading import registry as benchmarks
from cotdyn.protocol import signals
from cotdyn.workflow import checks
from cotdyn.workflow.study import StudyError

REGISTERED = str(ROOT / "preregistration" / "plan.yaml")
TABLES = (backends.REGISTRY, backends.ORIGINS, backends.BROKEN, benchmarks.REGISTRY, benchmarks.ORIGINS,
          benchmarks.BROKEN, signals.SIGNALS, signals.ORIGINS, signals.BROKEN)  # fmt: skip


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path to install packages into; afterwards the registries forget them."""
    before = [dict(table) for table in TABLES]
    modules = set(sys.modules)
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))

    def discover():
        importlib.invalidate_caches()
        backends.discover()
        benchmarks.discover()
        signals.discover()

    yield folder, discover
    for table, was in zip(TABLES, before):
        table.clear()
        table.update(was)
    for name in set(sys.modules) - modules:
        if name.startswith(("lab_", "pkg_")):
            sys.modules.pop(name)


def init(capsys, tmp_path, *args) -> tuple[int, str, str]:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "question": "What is 1 + 1?", "gold": "2"}\n')
    code = cotdyn_main(["init", str(tmp_path / "mine"), "--jsonl", str(tmp_path / "p.jsonl"), "--answer", "number",
                        "--id", "id", "--registered-plan", REGISTERED, "--power-reps", "0", *args])  # fmt: skip
    out = capsys.readouterr()
    return code, out.out, out.err


def echo_study(tmp_path) -> dict:
    return simulated(tmp_path) | {"models": {"sim": {"backend": "echo", "revision": "r1"}}}


def test_a_missing_declared_dependency_is_named_by_init_and_stops_the_run_before_its_first_job(site, tmp_path, capsys):
    folder, discover = site
    distribution(folder, "lab-backends", "0.3.1", {"lab_backends": BACKEND_MODULE}, "[cotdyn.backends]\necho = lab_backends:build\n")  # fmt: skip
    (folder / "echo-env.yaml").write_text("name: echo\ndependencies: [python=3.11]\n")
    discover()
    named = (
        "backend echo (lab-backends 0.3.1) needs lab-dep>=1.0,<2 (not installed): pip install 'lab-dep>=1.0,<2', "
        "or run it in the environment its declaration names (snakemake --sdm conda)"
    )
    code, _, err = init(capsys, tmp_path, "--backend", "echo")
    assert code == 0 and f"note: {named}" in err, err  # the config is written: its jobs may run under conda
    study = study_of(tmp_path, echo_study(tmp_path))
    with pytest.raises(StudyError) as stopped:  # a run, in this environment: stopped as it is read
        checks.check_before_planning(study, True, ["--cores", "2"])
    assert str(stopped.value).endswith(f"study.yaml: models.sim: {named}")
    checks.check_before_planning(study, True, ["-np", "--cores", "2"])  # a dry run plans on, naming it
    assert f"cotdyn: a run here would stop: {stopped.value}" in capsys.readouterr().err
    checks.check_before_planning(study, True, ["--cores", "2"], in_conda_envs=True)  # its own environment

    distribution(folder, "lab-dep", "1.4", {"lab_dep": "VERSION = '1.4'\n"})
    importlib.invalidate_caches()
    checks.check_before_planning(study, True, ["--cores", "2"])
    (tmp_path / "again").mkdir()
    assert init(capsys, tmp_path / "again", "--backend", "echo")[2] == ""


def test_two_packages_declaring_one_name_are_named_by_init_and_the_dry_run(site, tmp_path, capsys):
    folder, discover = site
    for name in ("one", "two"):
        distribution(folder, f"pkg-{name}", "1.0", {}, f"[cotdyn.backends]\necho = pkg_{name}:build\n"
                     f"[cotdyn.benchmarks]\nmoney = pkg_{name}:MONEY\n[cotdyn.signals]\nflips = pkg_{name}:FLIPS\n")  # fmt: skip
    discover()
    clash = r"'{}' is declared by pkg-(one|two) 1.0 \(pkg_\1:{}\) and by pkg-(?!\1)(one|two) 1.0 \(pkg_\2:{}\); uninstall one of them"  # noqa: E501

    code, _, err = init(capsys, tmp_path, "--backend", "echo")
    assert code == 1 and "invalid choice" not in err
    assert re.search(r"cotdyn.backends: " + clash.format("echo", "build", "build"), err), err
    (tmp_path / "money.jsonl").write_text("")
    code = cotdyn_main(["init", str(tmp_path / "other"), "--benchmark", "money", "--backend", "simulated",
                        "--registered-plan", REGISTERED])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "cotdyn.benchmarks: 'money' is declared by pkg-" in err, err

    # the dry run reads the study: each refused name the config uses, named before the schema
    for config, where in [
        (echo_study(tmp_path), "models.sim.backend: cotdyn.backends: 'echo'"),
        (simulated(tmp_path, benchmarks={"m": {"kind": "money", "path": str(DATA / "gsm8k_test.jsonl")}}),
         "benchmarks.m.kind: cotdyn.benchmarks: 'money'"),
        (simulated(tmp_path, signals=["flips"]), "signals[0]: cotdyn.signals: 'flips'"),
    ]:  # fmt: skip
        with pytest.raises(StudyError) as refused:
            study_of(tmp_path, config)
        assert f"study.yaml: {where} is declared by pkg-" in str(refused.value)
        assert "Additional properties" not in str(refused.value)
    # a clash in a name the study does not use changes nothing in it
    study_of(tmp_path, simulated(tmp_path))


def test_a_signal_a_study_does_not_name_changes_nothing_and_one_it_names_must_load(site, tmp_path):
    folder, discover = site
    broken = SIGNAL_MODULE.replace("derive=_settle_step)", "derive=_settle_step, registered=True)")
    distribution(folder, "lab-signals", "0.1", {"lab_signals": broken}, "[cotdyn.signals]\nsettle_step = lab_signals:SETTLE_STEP\n")  # fmt: skip
    discover()
    assert study_of(tmp_path, simulated(tmp_path)).config.get("signals", []) == []
    with pytest.raises(
        StudyError,
        match=r"signals\[0\]: cotdyn.signals plugin 'settle_step' from lab-signals 0.1 is declared registered",
    ):  # noqa: E501
        study_of(tmp_path, simulated(tmp_path, signals=["settle_step"]))
    with pytest.raises(StudyError, match=r"config signals: 'not_a_signal' is not installed"):
        study_of(tmp_path, simulated(tmp_path, signals=["not_a_signal"]))


def test_the_audit_names_a_pinned_plugin_package_missing_or_at_another_version(site):
    from cotdyn.audit.plugins import pinned_plugin_problems

    folder, discover = site
    distribution(folder, "lab-signals", "0.2", {"lab_signals": SIGNAL_MODULE}, "[cotdyn.signals]\nsettle_step = lab_signals:SETTLE_STEP\n")  # fmt: skip
    discover()
    pinned = {"signals": {"settle_step": {"package": "lab-signals", "version": "0.1"}},
              "benchmarks": {"svamp_money": {"package": "lab-benchmarks", "version": "0.1"}}}  # fmt: skip
    assert pinned_plugin_problems({"plugins": pinned}) == [
        "benchmarks plugin 'svamp_money' comes from lab-benchmarks 0.1 (the study manifest's plugins), not installed "
        "here: pip install 'lab-benchmarks==0.1' and audit again",
        "signals plugin 'settle_step' comes from lab-signals 0.1 (the study manifest's plugins), 0.2 is installed "
        "here: pip install 'lab-signals==0.1' and audit again",
    ]
    assert pinned_plugin_problems({}) == []  # a manifest from before plugins were pinned, or with none
    assert pinned_plugin_problems({"plugins": {"signals": {"x": "lab-signals"}}}) == [
        "manifest plugins.signals: expected each a package and a version"
    ]
