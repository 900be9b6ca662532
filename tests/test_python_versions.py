"""The supported Python versions are stated once and held to (issue 53 item 6): the README's line,
pyproject's classifiers and requires-python agree, and the interpreter running the suite is one of
them, so a run on another Python fails here, naming what is supported, rather than deep in a job.

Only one version is supported, 3.11, the one the lock is made on: the lock does not install on
3.12 or 3.13 (README, "Set-up details"), so no other interpreter is tested."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
CLASSIFIER = re.compile(r"^Programming Language :: Python :: (3\.\d+)$")


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def supported() -> list[str]:
    """The X.Y versions pyproject's classifiers name."""
    return [m[1] for c in project()["classifiers"] if (m := CLASSIFIER.match(c))]


def test_the_running_interpreter_is_a_supported_one():
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert sys.implementation.name == "cpython"
    assert running in supported(), f"Python {running} is not supported (pyproject classifiers: {supported()})"
    assert SpecifierSet(project()["requires-python"]).contains(sys.version.split()[0])


def test_requires_python_admits_every_supported_version_and_refuses_older_ones():
    allowed = SpecifierSet(project()["requires-python"])
    assert supported() and all(allowed.contains(f"{v}.0") for v in supported())
    oldest = min(supported(), key=lambda v: tuple(map(int, v.split("."))))
    major, minor = map(int, oldest.split("."))
    assert not allowed.contains(f"{major}.{minor - 1}.0"), "requires-python admits a version older than supported"


def test_the_readme_states_the_versions_the_classifiers_name():
    readme = (ROOT / "README.md").read_text()
    stated = re.search(r"\*\*Supported Python: ([0-9., and]+)\*\*", readme)
    assert stated, "the README states no supported Python versions"
    assert re.findall(r"3\.\d+", stated[1]) == supported()
    assert re.search(r"^## Quick start \(Python ([0-9.]+),", readme, re.M)[1] in supported()
