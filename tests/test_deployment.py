"""The workflow used from another folder as a Snakemake module (docs/deployment.md), the catalog's
usage file, --containerize and the env files' paths."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from test_workflow import side_by_side

from cotdyn.plan.config import with_bundled_paths

DEFAULT_PLAN = ROOT / "preregistration/examples/default/plan.yaml"


def deployment_snakefile() -> str:
    """The deployment's Snakefile as docs/deployment.md gives it, with this checkout's path."""
    doc = (ROOT / "docs/deployment.md").read_text()
    (block,) = re.findall(r"```snakemake\n(.*?)```", doc, re.S)
    assert '"/path/to/cotdyn/Snakefile"' in block
    return block.replace("/path/to/cotdyn", str(ROOT))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Path:
    """A folder as snakedeploy lays it out (config/, workflow/Snakefile), outside the checkout."""
    folder = tmp_path_factory.mktemp("my-study")
    (folder / "config").mkdir()
    for name in ("config.yaml", "simulated.yaml"):
        shutil.copy(ROOT / "config" / name, folder / "config" / name)
    (folder / "workflow").mkdir()
    (folder / "workflow/Snakefile").write_text(deployment_snakefile())
    return folder


def run_in(folder: Path, *args):
    """snakemake as a user runs it in the deployment: its own Snakefile found there, no --snakefile."""
    env = {k: v for k, v in os.environ.items() if k != "COTDYN_ROOT"}
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--workflow-profile", "none", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    result.output = result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_the_module_dry_runs_the_default_and_the_simulated_config_in_another_folder(deployment):
    default, simulated = side_by_side(
        lambda: run_in(deployment, "-n"),
        lambda: run_in(deployment, "-n", "--configfile", "config/simulated.yaml"),
    )
    for result in (default, simulated):
        assert result.returncode == 0, result.output[-3000:]
        assert "reference" in result.output and "continuations" in result.output
    # the bundled plan and data are the checkout's, read from there
    assert str(DEFAULT_PLAN) in default.output and str(ROOT / "data/additions.jsonl") in default.output
    assert str(ROOT / "data/gsm8k_test.jsonl") in simulated.output
    assert not (deployment / "results").exists()  # a dry run writes no result


@pytest.mark.slow
def test_the_modules_start_of_run_is_shown_by_the_deployments_onstart(deployment, tmp_path):
    folder = tmp_path / "study"
    shutil.copytree(deployment, folder)
    # what a job sees of ${COTDYN_ROOT}, which the env files name and the workflow sets (not the user)
    with open(folder / "workflow/Snakefile", "a") as snakefile:
        snakefile.write(
            '\n\nrule show_root:\n    output:\n        "root.txt"\n    shell:\n        "echo $COTDYN_ROOT > {output}"\n'
        )
    result = run_in(folder, "--cores", "1", "results/default/checks/plan_check.json", "root.txt")
    assert result.returncode == 0, result.output[-3000:]
    assert (folder / "root.txt").read_text().strip() == str(ROOT)
    assert "cotdyn: the paths of this run, resolved:" in result.output
    assert f"  plan: {DEFAULT_PLAN}" in result.output
    assert f"  study: {folder / 'results/default'}" in result.output
    assert "cotdyn: study 'default'" in result.output  # the generation summary (cotdyn.generation.estimate)
    assert (folder / "results/default/checks/plan_check.json").exists()


def test_a_relative_path_is_the_working_directorys_then_the_checkouts(tmp_path):
    config = {
        "plan": "preregistration/examples/default/plan.yaml",
        "benchmarks": {"a": {"path": "data/additions.jsonl"}},
    }
    bundled = with_bundled_paths(config, ROOT, cwd=tmp_path)
    assert bundled["plan"] == str(DEFAULT_PLAN) and bundled["benchmarks"]["a"]["path"] == str(
        ROOT / "data/additions.jsonl"
    )
    assert config["benchmarks"]["a"]["path"] == "data/additions.jsonl"  # the given config is left alone
    # a file of the working directory wins; a path neither has is left for the run to name
    (tmp_path / "data").mkdir()
    (tmp_path / "data/additions.jsonl").write_text("{}\n")
    config["benchmarks"]["b"] = {"path": "data/mine.jsonl"}
    mine = with_bundled_paths(config, ROOT, cwd=tmp_path)
    assert (
        mine["benchmarks"]["a"]["path"] == "data/additions.jsonl"
        and mine["benchmarks"]["b"]["path"] == "data/mine.jsonl"
    )
    assert with_bundled_paths(config, ROOT, cwd=ROOT) == config  # in the checkout nothing changes


@pytest.mark.slow
def test_containerize_takes_every_rules_environment():
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--workflow-profile", "none"]
        + ["--containerize"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # a rule outside the planned jobs with a function as its conda: stopped it before it asked conda
    assert "is dynamic" not in result.stdout + result.stderr, result.stderr[-2000:]
    if shutil.which("conda"):  # the environments' hashes come from conda
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.startswith("FROM ") and "envs/analysis.yaml" in result.stdout
    else:
        assert "conda info" in result.stderr, result.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("env", sorted(p.name for p in (ROOT / "envs").glob("*.yaml")))
def test_an_env_files_paths_hold_from_the_copy_snakemake_builds_it_from(env, tmp_path):
    """Snakemake builds an environment from a copy of the file in .snakemake/conda/, and conda runs
    pip beside it: the pip section names the checkout by ${COTDYN_ROOT}, never by a relative path."""
    spec = yaml.safe_load((ROOT / "envs" / env).read_text())
    (pip,) = [d["pip"] for d in spec["dependencies"] if isinstance(d, dict)]
    options = [line.split(None, 1) for line in pip if line.startswith(("-e", "-c", "-r"))]
    assert ["-e", "${COTDYN_ROOT}"] in options
    for _, path in options:
        assert path.startswith("${COTDYN_ROOT}"), f"{env}: {path} is relative to the copy's folder"
        assert Path(path.replace("${COTDYN_ROOT}", str(ROOT))).exists()
    # pip, run where conda runs it, installs this checkout
    copy = tmp_path / ".snakemake/conda"
    copy.mkdir(parents=True)
    (copy / "requirements.txt").write_text("".join(f"{o} {p}\n" for o, p in options))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-build-isolation", "-r"]
        + ["requirements.txt"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COTDYN_ROOT": str(ROOT)},
    )
    assert result.returncode == 0 and "cotdyn" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]


def test_the_catalog_usage_file_has_the_standardized_keys():
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    assert set(usage["mandatory-flags"]) == {"desc", "flags"} and usage["report"] is True
    assert set(usage["software-stack-deployment"]) <= {"conda", "apptainer", "apptainer+conda"}
    assert usage["software-stack-deployment"]["conda"] is True
    assert (ROOT / "config/README.md").exists() and (ROOT / "config/config.yaml").exists()


def test_the_snakemake_internals_the_workflow_reads_are_still_there():
    """Snakemake 9.27 has no documented API for these (docs/developer-notes.md, "What the workflow
    reads of Snakemake"); an upgrade that drops one fails here, not in a study's run."""
    import snakemake.api  # noqa: F401  (first, as Snakemake's own command does: its modules import in a cycle)
    from snakemake.dag import DAG
    from snakemake.workflow import Workflow

    for name in ("is_main_process", "executor_plugin", "dryrun", "dag", "current_basedir", "overwrite_configfiles"):
        assert isinstance(getattr(Workflow, name), property), name
    assert "remote_execution_settings" in Workflow.__dataclass_fields__
    # common.smk reads the --config entries as given and as Snakemake typed them (issue 53)
    from snakemake.settings.types import ConfigSettings

    assert "config_settings" in Workflow.__dataclass_fields__
    assert {"config", "config_args"} <= set(ConfigSettings.__dataclass_fields__)
    assert callable(Workflow.source_path) and callable(DAG.needrun_jobs)
    # --report still sets nothing the Snakefile could read before the report is made
    source = Path(sys.modules["snakemake.workflow"].__file__).read_text()
    assert "self.report_text = None" in source and "def create_report(" in source
