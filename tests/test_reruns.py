"""What a rerun redoes (issue 37, reruns): the jobs a change plans, by dry run over a copy of the shared
small simulated study, with the project's own workflow profile (its rerun triggers).

A change to what a job runs (a function body in a cotdyn module its script imports) plans that job;
a comment, a docstring or a performance knob (a model's chunk_size) plans no generation; a dry run
writes nothing; the jobs import the code beside the Snakefile, as the run's own process does.
And what a Snakemake user expects (issue 53 item 4): a finished study lists no changed params, code
or input; a cell added to the config plans that cell's jobs and the analyses over every cell, not
the other cells' generation; an input deleted after a run is named by the dry run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from cotdyn.provenance.code import code_hash, imported_modules, normalised

GENERATION = {"reference", "continuations"}
# what the copy of the workflow needs: the Snakefiles, their rules, scripts and report captions,
# the package its jobs import (with the schema), the profiles (their rerun triggers), envs and config
WORKFLOW_PARTS = ("Snakefile", "workflow", "src", "profiles", "envs", "config", "requirements.lock")


# --- the hash itself -------------------------------------------------------------------------


def test_comments_docstrings_and_layout_do_not_change_the_normalised_source():
    code = 'def f(x):\n    """Doubles."""\n    return 2 * x\n'
    same = '# a note\ndef f(x):  # inline\n    """Twice x, said otherwise."""\n\n    return (2 *\n            x)\n'
    assert normalised(code) == normalised(same)
    assert normalised(code) != normalised(code.replace("2 * x", "3 * x"))


def test_the_hash_follows_imports_through_modules_relative_ones_too(tmp_path):
    src = tmp_path / "src"
    (src / "cotdyn" / "a").mkdir(parents=True)
    (src / "cotdyn" / "__init__.py").write_text("")
    (src / "cotdyn" / "a" / "__init__.py").write_text("")
    (src / "cotdyn" / "a" / "top.py").write_text("from .deep import g\n\ndef f():\n    return g()\n")
    (src / "cotdyn" / "a" / "deep.py").write_text("def g():\n    return 1\n")
    (src / "cotdyn" / "unused.py").write_text("X = 1\n")
    script = tmp_path / "script.py"
    script.write_text("import json\nfrom cotdyn.a.top import f\n")
    assert set(imported_modules(script, src)) == {"cotdyn", "cotdyn.a", "cotdyn.a.top", "cotdyn.a.deep"}
    before = code_hash(script, src)
    (src / "cotdyn" / "unused.py").write_text("X = 2\n")
    (src / "cotdyn" / "a" / "deep.py").write_text("# a comment\ndef g():\n    return 1\n")
    assert code_hash(script, src) == before
    (src / "cotdyn" / "a" / "deep.py").write_text("def g():\n    return 2\n")
    assert code_hash(script, src) != before


def test_the_generation_scripts_import_no_records_or_analysis_module():
    """Generation (GPU jobs on the panel) reruns for a change in what it runs, never for one below it."""
    for script in ("reference.py", "continuations.py", "check_plan.py", "problems.py"):
        modules = imported_modules(ROOT / "workflow" / "scripts" / script, ROOT / "src")
        later = sorted(m for m in modules if m.startswith(("cotdyn.records", "cotdyn.analysis", "cotdyn.report")))
        assert later == [], (script, later)


# --- dry runs over a copy of the finished study ----------------------------------------------


@pytest.fixture
def copied(small_simulated_study, tmp_path) -> tuple[Path, Path, Path]:
    """(workflow, study, config): a copy of the workflow, and of the finished study (copy2 keeps the
    mtimes; .snakemake, with the params each job ran with, comes along); the cache is the original's."""
    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    workflow, study = tmp_path / "workflow", tmp_path / "study"
    for part in WORKFLOW_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, workflow / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            workflow.mkdir(exist_ok=True)
            shutil.copy2(source, workflow / part)
    for part in ("results", ".snakemake"):
        shutil.copytree(small_simulated_study.root / part, study / part, symlinks=True)
    config = shutil.copy2(small_simulated_study.config, study / small_simulated_study.config.name)
    return workflow, study, Path(config)


def snakemake_in(workflow: Path, study: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    """Snakemake over the copy with the project's workflow profile, its output as ``output``. The
    test's own PYTHONPATH is dropped: the workflow puts the copy's src/ first itself."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", *args, "--snakefile", str(workflow / "Snakefile")]
        + ["--workflow-profile", str(workflow / "profiles" / "default"), "--configfile", str(config)],
        cwd=study,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    result.output = result.stdout + result.stderr
    return result


def dry_run(workflow: Path, study: Path, config: Path) -> tuple[dict[str, int], str]:
    """The jobs a dry run plans, by rule, and its output."""
    result = snakemake_in(workflow, study, config, "-n")
    output = result.output
    assert result.returncode == 0, output[-3000:]
    if "Nothing to be done" in output:
        return {}, output
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}, output


def test_a_copy_of_the_finished_study_plans_nothing(copied):
    planned, output = dry_run(*copied)
    assert planned == {}, output[-3000:]


def test_a_performance_knob_plans_no_generation_and_no_derivation(copied):
    workflow, study, config = copied
    entry = yaml.safe_load(config.read_text())
    entry["models"]["sim"]["chunk_size"] = 7
    config.write_text(yaml.safe_dump(entry))
    planned, output = dry_run(workflow, study, config)
    # the manifests record the whole config (its hash), so they, and the pages that show them, redo
    assert planned and not GENERATION & set(planned), output[-3000:]
    assert not {"check_plan", "problems", "records", "hypotheses"} & set(planned), planned


def test_a_function_body_edited_in_a_records_module_plans_the_records_jobs_not_generation(copied):
    workflow, study, config = copied
    derive = workflow / "src/cotdyn/records/derive.py"
    source = derive.read_text()
    body = re.search(r"^def derive_records\(.*?\n(    \"\"\".*?\"\"\"\n)", source, re.S | re.M)
    derive.write_text(source[: body.end()] + "    unused = 0  # a change to what the job runs\n" + source[body.end() :])
    planned, output = dry_run(workflow, study, config)
    assert planned.get("records") == 3, output[-3000:]  # one cell, three variants
    assert not GENERATION & set(planned) and "check_plan" not in planned, planned


def test_an_edit_to_a_module_the_plan_check_and_the_records_share_plans_both_in_one_run(copied):
    """Issue 65: Snakemake skips its own checks of every job below one that must rerun, and the
    reference rule took plan_check.json as ancient(), which passes no rerun on: check_plan was
    planned and the records, whose code changed too, were not (stale until the next run)."""
    workflow, study, config = copied
    module = workflow / "src/cotdyn/protocol/trajectory.py"
    source = module.read_text()
    docstring = '    """The answers that enter the distribution: nulls dropped (registered) or kept as a class."""\n'
    assert docstring in source
    module.write_text(source.replace(docstring, docstring + "    unused = 0  # a change to what the jobs run\n"))
    planned, output = dry_run(workflow, study, config)
    assert {"check_plan", "records", *GENERATION} <= set(planned), output[-3000:]
    assert planned["records"] == 3, planned  # one cell, three variants


def test_comments_and_docstrings_in_scripts_and_modules_plan_nothing(copied):
    workflow, study, config = copied
    for script in ("reference.py", "continuations.py", "records.py"):
        path = workflow / "workflow/scripts" / script
        path.write_text("# a note for the reader\n" + path.read_text().replace("\n\n", "\n\n# and another\n", 1))
    derive = workflow / "src/cotdyn/generation/run.py"
    derive.write_text(derive.read_text().replace('"""The I/O shell', '"""A reworded docstring. The I/O shell', 1))
    planned, output = dry_run(workflow, study, config)
    assert planned == {}, output[-3000:]


def _every_file(*folders: Path) -> dict[str, tuple[int, bytes]]:
    """Every file's mtime and bytes, but Snakemake's own state: a dry run keeps its IO cache
    (.snakemake/iocache/latest.pkl, which --trust-io-cache reads)."""
    return {
        str(p): (p.stat().st_mtime_ns, p.read_bytes())
        for folder in folders
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".snakemake" not in p.relative_to(folder).parts
    }


def test_a_dry_run_over_a_study_with_a_truncated_records_file_changes_no_file(copied, small_simulated_study):
    workflow, study, config = copied
    records = study / "results/t/cells/sim-gsm8k/newline/records.parquet"
    records.write_bytes(records.read_bytes()[:1000])
    cache = Path(yaml.safe_load(config.read_text())["cache"])
    before = _every_file(study, cache)
    _, output = dry_run(workflow, study, config)
    assert "newline/records.parquet is damaged" in output and "writes nothing" in output, output[-3000:]
    after = _every_file(study, cache)
    assert sorted(after) == sorted(before) and str(records) in before
    changed = [path for path in before if after[path] != before[path]]
    assert changed == []


# --- reruns a Snakemake user expects (issue 53 item 4) ----------------------------------------


def planned_jobs(output: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job a dry run's output shows."""
    jobs = []
    for job in re.finditer(r"^(?:local)?rule (\w+):\n(.*?)(?=^\S|\Z)", output, re.M | re.S):
        shown = re.search(r"^\s+wildcards: (.+)$", job.group(2), re.M)
        wildcards = dict(item.split("=", 1) for item in shown.group(1).split(", ")) if shown else {}
        jobs.append((job.group(1), wildcards))
    return jobs


def test_a_finished_study_lists_no_changed_params_code_or_input(copied):
    workflow, study, config = copied
    for kind in ("params", "code", "input"):
        result = snakemake_in(workflow, study, config, "--list-changes", kind)
        assert result.returncode == 0, result.output[-3000:]
        listed = [line for line in result.output.splitlines() if line.strip() and (study / line.strip()).is_file()]
        assert listed == [], (kind, listed)


def test_a_cell_added_plans_its_own_jobs_and_the_analyses_over_every_cell_only(copied):
    workflow, study, config = copied
    entry = yaml.safe_load(config.read_text())
    entry["models"]["sim2"] = {"backend": "simulated"}
    entry["cells"].append("sim2-gsm8k")
    config.write_text(yaml.safe_dump(entry))
    planned, output = dry_run(workflow, study, config)
    by_cell = {}
    for rule, wildcards in planned_jobs(output):
        by_cell.setdefault(wildcards.get("cell"), []).append(rule)
    # the old cell's manifest records the whole config's hash, as after a performance knob's edit
    assert sorted(by_cell.get("sim-gsm8k", [])) == ["cell_manifest"], by_cell
    new = by_cell["sim2-gsm8k"]
    assert (new.count("reference"), new.count("continuations"), new.count("records")) == (2, 3, 3), new
    assert "problems" not in planned  # the same benchmark: its problems stay
    assert {"hypotheses", "dynamics", "exploratory", "manifest"} <= set(planned), planned


def test_an_input_missing_after_a_run_is_named_by_the_dry_run(copied):
    workflow, study, config = copied
    chains = sorted((study / "results/t/cells/sim-gsm8k/reference").glob("*/chains.parquet"))[0]
    analysis = study / "results/t/analysis/registered/hypotheses.json"
    chains.unlink()
    analysis.unlink()
    planned, output = dry_run(workflow, study, config)
    rebuilt = {(rule, tuple(sorted(w.items()))) for rule, w in planned_jobs(output)}
    assert ("reference", (("cell", "sim-gsm8k"), ("ref", chains.parent.name))) in rebuilt, output[-3000:]
    assert ("hypotheses", (("variant", "registered"),)) in rebuilt
    assert "Missing output files" in output and str(chains.relative_to(study)) in output
    # a benchmark file the study reads, deleted: the dry run stops, naming it
    entry = yaml.safe_load(config.read_text())
    data = study / "gsm8k.jsonl"
    data.write_bytes(Path(entry["benchmarks"]["gsm8k"]["path"]).read_bytes())
    entry["benchmarks"]["gsm8k"]["path"] = str(data)
    config.write_text(yaml.safe_dump(entry))
    data.unlink()
    result = snakemake_in(workflow, study, config, "-n")
    assert result.returncode != 0 and "Traceback" not in result.output
    assert f"benchmarks.gsm8k: {data}: No such file or directory" in result.output, result.output[-3000:]


# --- one import path ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_jobs_import_the_package_beside_the_snakefile_as_the_run_does(tmp_path):
    """A cotdyn earlier on the path (an installed copy, another checkout) is not what the jobs run:
    a stand-in that refuses to load sits first on PYTHONPATH, and the check_plan job still runs."""
    from test_workflow import _simulated_config, _write

    decoy = tmp_path / "decoy" / "cotdyn"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('the stand-in cotdyn was imported')\n")
    config = _write(tmp_path, _simulated_config(tmp_path))
    env = {**__import__("os").environ, "PYTHONPATH": str(decoy.parent)}
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--workflow-profile", "none"]
        + ["results/t/checks/plan_check.json", "--cores", "1", "--configfile", str(config)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "stand-in" not in output and (tmp_path / "results/t/checks/plan_check.json").exists()
