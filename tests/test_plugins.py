"""A lab's backend in its own package (issue 50): installed as a distribution of its own (a
``dist-info`` folder with its entry points, and its module, on sys.path), it is found through the
``cotdyn.backends`` entry points, listed by ``cotdyn ls`` with its package, its declared dependency is
checked (a missing or out-of-range one is a named error), and it reaches the config schema, ``cotdyn
init``, the workflow's environment choice and the manifest's package versions. Adding it took its
declaration (the module written below) and this test: no file of cotdyn was edited.
"""

from __future__ import annotations

import re
import sys

import pytest
import yaml
from conftest import ROOT
from lab_plugins import BACKEND_MODULE, distribution

from cotdyn import plugins
from cotdyn.cli.main import main as cotdyn_main
from cotdyn.generation.backends import make_backend, registry
from cotdyn.generation.backends.base import Request, Sampling, describe_problems
from cotdyn.provenance.code import code_hash, plugin_modules


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """The lab's package installed (on sys.path), and taken out again after the test."""
    site = tmp_path / "site"
    site.mkdir()
    distribution(
        site,
        "lab-backends",
        "0.3.1",
        {"lab_backends": BACKEND_MODULE},
        "[cotdyn.backends]\necho = lab_backends:build\n",
    )
    (site / "echo-env.yaml").write_text("name: echo\ndependencies: [python=3.11]\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    for table in (registry.REGISTRY, registry.ORIGINS, registry.BROKEN):
        for name in ("echo", "fragile"):
            table.pop(name, None)
    for module in ("lab_backends", "lab_dep", "fragile_backend"):
        sys.modules.pop(module, None)


def ls(capsys, *kinds) -> str:
    assert cotdyn_main(["ls", *kinds]) == 0
    return capsys.readouterr().out


def test_a_backend_in_its_own_package_is_found_listed_and_checked(lab, capsys):
    assert "echo" not in registry.REGISTRY
    registry.discover()
    assert registry.REGISTRY["echo"].summary.startswith("echo:")
    assert registry.package_of("echo") == "lab-backends 0.3.1"
    assert registry.package_of("transformers").startswith("cotdyn ")  # cotdyn's own, found the same way

    listed = ls(capsys, "backends")
    line = next(line for line in listed.splitlines() if line.split()[:1] == ["echo"])
    assert "lab-backends 0.3.1" in line and "lab-dep>=1.0,<2 (not installed)" in line, line

    entry = {"backend": "echo", "revision": "r1"}
    with pytest.raises(plugins.MissingDependency) as missing:
        make_backend(entry)
    assert str(missing.value) == (
        "backend echo (lab-backends 0.3.1) needs lab-dep>=1.0,<2 (not installed): pip install 'lab-dep>=1.0,<2', "
        "or run it in the environment its declaration names"
    )

    distribution(lab, "lab-dep", "2.0", {"lab_dep": "VERSION = '2.0'\n"})  # out of the declared range
    with pytest.raises(plugins.MissingDependency, match=r"lab-dep>=1.0,<2 \(version 2.0 is installed\)"):
        make_backend(entry)


def test_a_plugin_with_its_dependency_builds_generates_and_keeps_the_describe_contract(lab):
    distribution(lab, "lab-dep", "1.4", {"lab_dep": "VERSION = '1.4'\n"})
    registry.discover()
    backend = make_backend({"backend": "echo", "revision": "r1", "echo": {"loud": True}})
    assert describe_problems(backend, "echo") == []
    assert backend.describe()["lab_dep"] == "1.4"
    request = Request((5, 6), 2, Sampling(temperature=1.0, max_tokens=4), seed=0)
    assert [c.token_ids for c in backend.generate([request])[0]] == [(5, 6), (5, 6)]
    # the manifest records the lab's package and its declared dependency, as the job had them
    assert registry.package_versions("echo") == {"lab-backends": "0.3.1", "lab-dep": "1.4"}
    # its generation jobs run in the conda environment its package ships
    assert registry.environment_for({"backend": "echo"}) == str(lab / "echo-env.yaml")


def test_the_plugin_reaches_the_config_schema_and_cotdyn_init(lab, tmp_path, monkeypatch):
    from cotdyn.cli.init import InitError, write_skeleton
    from cotdyn.plan.schema import SCHEMA

    registry.discover()
    schema = registry.config_schema(yaml.safe_load(SCHEMA.read_text()))
    model = schema["properties"]["models"]["additionalProperties"]
    assert "echo" in model["properties"]["backend"]["enum"] and "loud" in model["properties"]["echo"]["properties"]

    (tmp_path / "p.jsonl").write_text('{"id": "a", "question": "What is 1 + 1?", "gold": "2"}\n')
    monkeypatch.chdir(tmp_path)
    registered = str(ROOT / "preregistration" / "plan.yaml")
    fields = {"id": "id", "question": "question", "gold": "gold"}
    write_skeleton(tmp_path / "mine", "p.jsonl", "number", fields, backend="echo", registered_plan=registered,
                   options={"loud": True})  # fmt: skip
    config = yaml.safe_load((tmp_path / "mine" / "config.yaml").read_text())
    # no device: its declaration names no setting
    assert config["models"] == {"echo": {"backend": "echo", "revision": "echo-1", "echo": {"loud": True}}}
    with pytest.raises(InitError, match=r"^--dtype float16: means nothing to backend echo \(it takes neither"):
        write_skeleton(tmp_path / "other", "p.jsonl", "number", fields, backend="echo", registered_plan=registered,
                       dtype="float16")  # fmt: skip


def test_a_plugin_that_fails_to_import_is_a_named_error_and_hides_no_other(lab, capsys):
    distribution(
        lab,
        "fragile-backends",
        "0.1",
        {"fragile_backend": "import not_installed_anywhere_zz\n"},
        "[cotdyn.backends]\nfragile = fragile_backend:build\n",
    )
    registry.discover()
    assert "echo" in registry.REGISTRY and "fragile" not in registry.REGISTRY
    with pytest.raises(ValueError) as broken:
        registry.spec("fragile", "model 'f'")
    assert str(broken.value) == (
        "model 'f': cotdyn.backends plugin 'fragile' from fragile-backends 0.1 failed to load "
        "(fragile_backend:build): ModuleNotFoundError: No module named 'not_installed_anywhere_zz'"
    )
    assert "  fragile          BROKEN: cotdyn.backends plugin 'fragile'" in ls(capsys, "backends")


def test_an_entry_point_must_name_the_backend_its_module_registers(lab):
    distribution(lab, "misnamed", "1.0", {}, "[cotdyn.backends]\necho2 = lab_backends:build\n")
    registry.discover()
    assert "echo" in registry.REGISTRY  # its module registered "echo", under its own entry point
    with pytest.raises(ValueError, match="registered no backend of that name"):
        registry.spec("echo2")
    registry.BROKEN.pop("echo2")


def test_two_packages_declaring_one_name_differently_are_refused_where_it_is_used(lab, capsys):
    """Two packages declaring one backend name: that name is refused, naming both, when it is used or
    listed; the import of cotdyn and every other plugin still work (it was a traceback at import)."""
    for name in ("one", "two"):
        distribution(lab, f"pkg-{name}", "1.0", {}, f"[cotdyn.backends]\nfragile = mod_{name}:build\n")
    registry.discover()
    assert "echo" in registry.REGISTRY and "fragile" not in registry.REGISTRY
    with pytest.raises(ValueError) as clash:
        registry.spec("fragile", "model 'f'")
    assert re.fullmatch(
        r"model 'f': cotdyn.backends: 'fragile' is declared by pkg-(one|two) 1.0 \(mod_\1:build\) and by "
        r"pkg-(?!\1)(one|two) 1.0 \(mod_\2:build\); uninstall one of them",
        str(clash.value),
    ), clash.value
    line = next(line for line in ls(capsys, "backends").splitlines() if line.split()[:1] == ["fragile"])
    assert "BROKEN: cotdyn.backends: 'fragile' is declared by pkg-" in line, line


def test_a_plugin_is_part_of_the_code_hash_of_the_jobs_that_discover_it(lab):
    """A lab's backend is code the generation jobs run, though no import of theirs names it: editing
    it changes their code hash (so they rerun), a comment does not, and a job that discovers no
    backends (the grading rule) keeps its hash."""
    scripts = ROOT / "workflow" / "scripts"
    hashes = lambda: {s: code_hash(scripts / s, ROOT / "src") for s in ("reference.py", "grading.py")}  # noqa: E731
    before = hashes()
    module = lab / "lab_backends.py"
    module.write_text(module.read_text() + "# a comment changes nothing a job runs\n")
    assert hashes() == before
    module.write_text(module.read_text().replace('"echo", "stop"', '"echo!", "stop"'))
    after = hashes()
    assert after["reference.py"] != before["reference.py"]
    assert after["grading.py"] == before["grading.py"]
    assert "cotdyn.backends:lab_backends" in plugin_modules(["cotdyn.backends"])
