"""cotdyn's own tests assert what they built, not what the environment holds (issue 65, finding 5):
with another lab's three plugin packages installed beside cotdyn (a signal, a benchmark and a backend
whose dependency is missing), the tests that list backends, benchmarks, signals and records columns
pass unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from lab_plugins import install_neighbour

import cotdyn

# The tests that read the registries and the records' columns (each failed on 8b422ed with the
# neighbour's packages installed, or lists every installed plugin).
LISTING_TESTS = [
    "tests/test_registry.py::test_the_registered_plan_still_reads",
    "tests/test_records_factory.py",
    "tests/test_ls.py",
    "tests/test_signals.py",
    "tests/test_plugin_additions.py",
    "tests/test_plugins.py",
    "tests/test_plugin_trust.py",
    "tests/test_registry_entries.py",
    "tests/test_backend_contract.py::test_a_declaration_is_complete",
]


@pytest.mark.slow  # starts a cotdyn and a pytest process
def test_the_listing_tests_pass_with_another_labs_plugins_installed(tmp_path):
    site = install_neighbour(tmp_path / "site")
    src = Path(cotdyn.__file__).parents[1]  # the cotdyn under test, first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(site), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", "ls"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert "late_flips       nb-signals 2.0" in listed.stdout and "nb_echo" in listed.stdout, listed.stderr
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "not slow", *LISTING_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:]
