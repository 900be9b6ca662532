"""A lab's three plugin packages through a whole study (issue 65): built here in a temporary folder (a
signal, a benchmark with its own normalization, a backend with a declared dependency), they go
through ``cotdyn init``, ``cotdyn register``, the run and the audit (PASS); an edit to each, in turn,
reruns exactly the jobs whose code uses it, in one run, leaving no stale output (the audit passes
again); and an audit without one of the packages installed names it, with its version."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT
from factories import without_assumed_effects
from lab_plugins import install_lab

import cotdyn
from cotdyn.files.layout import STUDY_MANIFEST

GENERATION = {"reference", "continuations"}
SMALL = ("--protocol", "m=2", "--protocol", "reference_max_tokens=60", "--protocol", "continuation_max_tokens=30",
         "--power-reps", "0")  # fmt: skip


class Lab:
    """The lab's folder: its plugin packages on PYTHONPATH beside the cotdyn under test."""

    def __init__(self, root: Path):
        self.root, self.site = root, install_lab(root / "site")
        src = Path(cotdyn.__file__).parents[1]
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(self.site)])}

    def run(self, *command: str, ok: bool = True) -> str:
        done = subprocess.run(command, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=600)
        output = done.stdout + done.stderr
        assert (done.returncode == 0) == ok, output[-4000:]
        return output

    def cotdyn(self, *words: str, ok: bool = True) -> str:
        return self.run(sys.executable, "-m", "cotdyn.cli.main", *words, ok=ok)

    def snakemake(self, *args: str) -> str:
        return self.run(
            sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
            "--workflow-profile", str(ROOT / "profiles" / "default"),
            "--configfile", "studies/lab/config.yaml", "--cores", "2", *args,
        )  # fmt: skip

    def planned(self) -> dict[str, int]:
        """The jobs a dry run plans, by rule."""
        output = self.snakemake("-n")
        if "Nothing to be done" in output:
            return {}
        table = output.split("Job stats:", 1)[1].split("total", 1)[0]
        return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}

    def audit(self, ok: bool = True) -> str:
        output = self.cotdyn("audit", "results/lab", ok=ok)
        return next(line for line in output.splitlines() if line.startswith("audit of ")) + "\n" + output

    def edit(self, module: str, old: str, new: str) -> None:
        path = self.site / f"{module}.py"
        text = path.read_text()
        assert old in text, (module, old)
        path.write_text(text.replace(old, new))

    def records(self) -> pd.DataFrame:
        return pd.concat(pd.read_parquet(p) for p in sorted((self.root / "results/lab/cells").rglob("records.parquet")))


@pytest.mark.slow
def test_a_labs_three_plugins_run_a_study_that_reruns_what_an_edit_changes_and_audits(tmp_path):
    lab = Lab(tmp_path)
    (tmp_path / "preregistration").symlink_to(ROOT / "preregistration")
    lab.cotdyn("init", "studies/lab", "--benchmark", "svamp_money", "--backend", "lab_sim",
               "--signal", "settle_step", *SMALL)  # fmt: skip
    plan = tmp_path / "studies" / "lab" / "plan.yaml"  # its power table is tests/test_power.py's
    plan.write_text(without_assumed_effects(plan.read_text()))
    lab.cotdyn("register", "--plan", "studies/lab/plan.yaml", "--registered", "studies/lab/REGISTERED",
               "--date", "2026-12-07")  # fmt: skip
    lab.snakemake()
    assert "PASS" in lab.audit().splitlines()[0]
    manifest = json.loads((tmp_path / "results/lab" / STUDY_MANIFEST).read_text())
    assert manifest["plugins"] == {
        "benchmarks": {"svamp_money": {"package": "lab-benchmarks", "version": "0.1"}},
        "signals": {"settle_step": {"package": "lab-signals", "version": "0.1"}},
    }
    before = lab.records()
    assert before["settle_step"].notna().any()

    # a signal: its records and what reads them, not the plan check, the problems or generation
    lab.edit("lab_signals", "return float(step)", "return float(step) + 1.0")
    planned = lab.planned()
    assert planned.get("records") and planned.get("hypotheses"), planned
    assert not {"check_plan", "problems", *GENERATION} & set(planned), planned
    lab.snakemake()
    assert lab.planned() == {}  # one run did it all
    after = lab.records()
    kept = before["settle_step"].notna()
    assert (after["settle_step"][kept.to_numpy()].to_numpy() == before["settle_step"][kept].to_numpy() + 1).all()
    assert "PASS" in lab.audit().splitlines()[0]

    # a benchmark's rule: the problems, the answers the generation jobs extract, and what reads them
    lab.edit("lab_benchmarks", '.rstrip(".")', '.rstrip(".").strip()')
    planned = lab.planned()
    assert {"problems", "records", *GENERATION} <= set(planned), planned
    lab.snakemake()
    assert lab.planned() == {}
    assert "PASS" in lab.audit().splitlines()[0]

    # a backend: generation and what follows it, not the problems or the plan check
    lab.edit("lab_backends", "return LabBackend(golds or {}", "backend = LabBackend(golds or {}")
    lab.edit("lab_backends", 'benchmark or "gsm8k", Planted())', 'benchmark or "gsm8k", Planted())\n    return backend')
    planned = lab.planned()
    assert GENERATION <= set(planned) and planned.get("records"), planned
    assert not {"check_plan", "problems"} & set(planned), planned
    lab.snakemake()
    assert lab.planned() == {}
    assert "PASS" in lab.audit().splitlines()[0]

    # a reviewer without the lab's signal package: the audit names it, with the version the study ran
    shutil.rmtree(lab.site / "lab_signals-0.1.dist-info")
    verdict = lab.audit(ok=False)
    assert "FAIL" in verdict.splitlines()[0], verdict[:3000]
    assert "signals plugin 'settle_step' comes from lab-signals 0.1" in verdict, verdict[:3000]
    assert "pip install 'lab-signals==0.1'" in verdict and "Traceback" not in verdict
