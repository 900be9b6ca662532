"""A core install (`pip install .`, no extras) runs what a reviewer runs: `cotdyn analyze`,
`cotdyn audit`, the report header and the analysis modules.

They run in a subprocess where every distribution of pyproject.toml's extras is unimportable
(a finder on ``sys.meta_path`` refuses them), so an import of torch, transformers, snakemake, ... creeping into
that path fails here rather than on a reviewer's laptop.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from test_audit import build_study
from test_envs import RULE_ENVS, closure, never_run

from cotdyn.audit.check import PLAN_CHECK

ROOT = Path(__file__).resolve().parents[1]
# The modules of the analysis and audit path: the CLI and every module the rules that run in
# envs/analysis.yaml reach (tests/test_envs.py), so a module added to that path is checked too.
CORE_MODULES = sorted(
    {"cotdyn.cli.main", "cotdyn.cli.prereg"}.union(
        *(closure(script, never_run("analysis.yaml"))[0] for _, script, env in RULE_ENVS if env == "analysis.yaml")
    )
)
# argv: blocked names, modules to import, code to run with sys.argv = [code, args...]. A finder
# first on sys.meta_path refuses the blocked names as if they were not installed.
RUNNER = textwrap.dedent("""
    import importlib, sys
    BLOCKED = set(sys.argv[1].split(","))

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked: not in the core install)", name=name)

    sys.meta_path.insert(0, NotInstalled())
    for module in sys.argv[2].split(","):
        importlib.import_module(module)
    sys.argv = sys.argv[3:]
    exec(sys.argv[0])
""")
CLI = "from cotdyn.cli.main import main; sys.exit(main(sys.argv[1:]))"
HEADER = "from cotdyn.report.header import write_header; write_header(*sys.argv[1:])"


def extras_imports() -> list[str]:
    """Top-level import names of every distribution an extra adds to the core dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    extra = {_name(r) for reqs in project["optional-dependencies"].values() for r in reqs} - core - {"cotdyn"}
    by_dist: dict[str, set[str]] = {}
    for top, dists in metadata.packages_distributions().items():
        for dist in dists:
            by_dist.setdefault(_name(dist), set()).add(top)
    names = set()
    for dist in extra:  # a distribution not installed here (vllm) imports under its own name
        names |= {t for t in by_dist.get(dist, {dist.replace("-", "_")}) if not t.startswith("_")}
    assert {"torch", "transformers", "snakemake", "peft", "datasets", "vllm"} <= names, names
    return sorted(names)


def _name(requirement: str) -> str:
    from packaging.requirements import Requirement

    return Requirement(requirement).name.lower().replace("_", "-")


def run_without_extras(code: str, *args: str, modules: list[str] = CORE_MODULES, cwd: Path = ROOT):
    return subprocess.run(
        [sys.executable, "-c", RUNNER, ",".join(extras_imports()), ",".join(modules), code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_blocker_blocks():
    done = run_without_extras("pass", modules=["cotdyn.generation.backends.transformers"])
    assert done.returncode != 0 and "No module named 'torch' (blocked" in done.stderr, done.stderr


@pytest.mark.slow
def test_analyze_audit_and_report_run_without_the_extras(tmp_path, data_dir):
    study = build_study(tmp_path, data_dir, {}, [])
    plan = tmp_path / "preregistration" / "plan.yaml"
    records = study / "cells" / "qwen7b-gsm8k" / "registered" / "records.parquet"

    analyzed = run_without_extras(
        CLI, "analyze", str(records), "--plan", str(plan), "--out", str(tmp_path / "out"), cwd=tmp_path
    )
    assert analyzed.returncode == 0, analyzed.stderr
    cli = json.loads((tmp_path / "out" / "hypotheses.json").read_text())
    rule = json.loads((study / "analysis" / "registered" / "hypotheses.json").read_text())
    rule.pop("preregistration")  # the rule adds the plan check's status; the rest is the same analysis
    assert cli == rule

    audited = run_without_extras(CLI, "audit", str(study), "--report", str(tmp_path / "audit.json"), cwd=tmp_path)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert (tmp_path / "audit.json").exists()

    header = run_without_extras(
        HEADER,
        "registered",
        str(study / "analysis" / "registered" / "hypotheses.json"),
        str(study / PLAN_CHECK),
        str(tmp_path / "header.html"),
    )
    assert header.returncode == 0, header.stderr
    assert b"<html" in (tmp_path / "header.html").read_bytes()
