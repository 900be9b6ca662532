"""A release (a git tag) deployed into a folder of its own as a Snakemake module, its wheel installed
in a clean venv, running a study to its audit PASS (docs/deployment.md); the shipped plans read
outside a checkout; the catalog's usage file, --containerize and the env files' paths."""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import ROOT
from test_workflow import side_by_side

from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.plan.config import with_bundled_paths

DEFAULT_PLAN = ROOT / "preregistration/examples/default/plan.yaml"

TAG = "v0.1.0"


def clean(environ=os.environ) -> dict:
    """The environment without a checkout's variables: only what the command line names is used."""
    return {k: v for k, v in environ.items() if k not in ("COTDYN_ROOT", "PYTHONPATH")}


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A release as a user's git remote holds it: a clone of this checkout's commit, tagged."""
    clone = tmp_path_factory.mktemp("release") / "cotdyn"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    subprocess.run(["git", "-C", str(clone), "tag", TAG], check=True, timeout=60)
    return clone


def deployment_snakefile(release: Path) -> str:
    """The deployment's Snakefile as docs/deployment.md gives it, its module the release's tag."""
    doc = (ROOT / "docs/deployment.md").read_text()
    (block,) = re.findall(r"```snakemake\n(.*?)```", doc, re.S)
    named = f'github("<owner>/cotdyn", path="workflow/Snakefile", tag="{TAG}")'
    assert named in block
    return block.replace(named, f'gitfile("{release}", "workflow/Snakefile", tag="{TAG}")')


def deploy(release: Path, folder: Path) -> Path:
    """A folder as docs/deployment.md lays it out, outside the checkout: the Snakefile, the profile
    and the configs, nothing else of the release."""
    (folder / "workflow").mkdir(parents=True)
    (folder / "workflow/Snakefile").write_text(deployment_snakefile(release))
    shutil.copytree(release / "profiles/default", folder / "profiles/default")
    (folder / "config").mkdir()
    for name in ("config.yaml", "simulated.yaml"):
        shutil.copy(release / "config" / name, folder / "config" / name)
    return folder


@pytest.fixture(scope="module")
def deployment(release, tmp_path_factory) -> Path:
    return deploy(release, tmp_path_factory.mktemp("deployed") / "my-study")


def run_in(folder: Path, *args, code: Path):
    """A command as a user runs it in the deployment (snakemake finds its own Snakefile there), with
    ``code`` (a src/ folder) as the installed cotdyn."""
    result = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={**clean(), "PYTHONPATH": str(code)},
    )
    result.output = result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_a_release_dry_runs_the_default_and_the_simulated_config_in_another_folder(release, deployment):
    default, simulated = side_by_side(
        lambda: run_in(deployment, "snakemake", "-n", code=release / "src"),
        lambda: run_in(deployment, "snakemake", "-n", "--configfile", "config/simulated.yaml", code=release / "src"),
    )
    for result in (default, simulated):
        assert result.returncode == 0, result.output[-3000:]
        assert "reference" in result.output and "continuations" in result.output
        assert str(ROOT) not in result.output
    # the bundled plan and data are the release's package data
    assert str(release / "preregistration/examples/default/plan.yaml") in default.output
    assert str(release / "data/additions.jsonl") in default.output
    assert str(release / "data/gsm8k_test.jsonl") in simulated.output
    assert not (deployment / "results").exists()  # a dry run writes no result


@pytest.mark.slow
def test_a_release_plans_with_snakemakes_code_trigger_and_refuses_conda_by_name(release, deployment):
    # without the profile, Snakemake's own code trigger joins each script to the git source
    code = run_in(deployment, "snakemake", "-n", "--workflow-profile", "none", code=release / "src")
    assert code.returncode == 0 and "continuations" in code.output, code.output[-3000:]
    conda = run_in(deployment, "snakemake", "-n", "--sdm", "conda", code=release / "src")
    assert conda.returncode != 0 and "install cotdyn from a checkout" in conda.output


def every_text(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def walkthrough_in(folder: Path, command) -> subprocess.CompletedProcess:
    """docs/your-study.md's four steps in ``folder`` on the simulated backend, each line run by
    ``command(folder, module, *args)``; the last step's result (the audit)."""
    from test_your_study import additions, walkthrough

    (folder / "studies/mine").mkdir(parents=True)
    (folder / "studies/mine/problems.jsonl").write_text(additions(60))
    for line in walkthrough():
        words = line.split()
        if words[:2] == ["cotdyn", "init"]:
            words += ["--backend=simulated", "--power-reps=0"]  # its power: tests/test_power.py
        result = command(folder, "cotdyn.cli.main" if words[0] == "cotdyn" else "snakemake", *words[1:])
        assert result.returncode == 0, f"{line}\n{result.output[-3000:]}"
        assert str(ROOT) not in result.output, line
    assert "audit of results/mine: PASS" in result.output
    return result


@pytest.fixture(scope="module")
def wheel(release, tmp_path_factory) -> SimpleNamespace:
    """The release's sdist and wheel, made by setuptools' build hooks (what `python -m build` calls),
    the wheel installed in a venv that sees the lock's packages (sdist: its members by path; python:
    the venv's interpreter; run: a command by that interpreter, as a user runs it, with no PYTHONPATH)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    dist = tmp_path / "dist"
    # the folder read first: the build hooks rewrite sys.argv as they run
    build = (
        "from setuptools import build_meta as b; import sys; out = sys.argv[1]; b.build_sdist(out), b.build_wheel(out)"
    )
    subprocess.run([sys.executable, "-c", build, str(dist)], cwd=release, check=True, capture_output=True, timeout=300)
    (sdist,), (wheel,) = dist.glob("*.tar.gz"), dist.glob("*.whl")
    with tarfile.open(sdist) as tar:
        shipped = {m.name.partition("/")[2]: m for m in tar.getmembers()}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    python = venv / "bin/python"
    install = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)

    def run(folder, *args):
        result = subprocess.run(
            [python, "-m", *args], cwd=folder, capture_output=True, text=True, timeout=600, env=clean()
        )
        result.output = result.stdout + result.stderr
        return result

    return SimpleNamespace(sdist=shipped, python=python, venv=venv, run=run)


@pytest.fixture(scope="module")
def deployed_study(release, wheel, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The four steps in a deployed folder, run by the release's wheel installed (docs/deployment.md):
    the folder and its audit."""
    folder = deploy(release, tmp_path_factory.mktemp("deployed-study") / "my-study")
    return folder, walkthrough_in(folder, wheel.run)


@pytest.mark.slow
def test_a_study_deployed_from_a_release_audits_pass_with_its_code_and_the_checkouts(wheel, deployed_study):
    """Nothing of the checkout is read, and the checkout's own cotdyn audits the study alike."""
    folder, audit = deployed_study
    # the plan copied the installed release's registered plan's protocol; the run's files name no checkout path
    shipped = wheel.venv.glob("lib/python*/site-packages/cotdyn/bundled/preregistration/plan.yaml")
    assert str(next(shipped)) in (folder / "studies/mine/plan.yaml").read_text()
    assert str(ROOT) not in every_text(folder)
    checkout = run_in(folder, "cotdyn.cli.main", "audit", "results/mine", code=ROOT / "src")
    assert checkout.returncode == 0, checkout.output[-3000:]
    assert checkout.output == audit.output  # the same registration, hashes and verdict
    manifest = json.loads((folder / "results/mine" / STUDY_MANIFEST).read_text())
    assert manifest["cotdyn"] == version("cotdyn")  # the release that made it, in the report's header too
    header = (folder / "results/mine/report/registered/header.html").read_text()
    assert f'Made by cotdyn <span class="docutils literal">{version("cotdyn")}</span>' in header, header


@pytest.mark.slow
def test_the_checkout_runs_the_deployed_studys_files_to_the_same_results(release, deployed_study, tmp_path):
    """The deployed study's own files (config, plan, registration, problems) run at a checkout's
    Snakefile give the same stored files, hash for hash, and the release's code audits that study."""
    deployed, _ = deployed_study
    folder = tmp_path / "from-checkout"
    shutil.copytree(deployed / "studies", folder / "studies")
    result = run_in(
        folder, "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--cores", "2",
        "--configfile", "studies/mine/config.yaml", code=ROOT / "src",
    )  # fmt: skip
    assert result.returncode == 0, result.output[-3000:]
    audit = run_in(folder, "cotdyn.cli.main", "audit", "results/mine", code=release / "src")
    assert audit.returncode == 0 and "audit of results/mine: PASS" in audit.output, audit.output[-3000:]
    # every stored file but the logs of a run's time and machine (a generation's seconds and start, a
    # manifest's hardware and the hashes of those logs)
    files = [
        {path: sha for path, sha in json.loads((f / "results/mine" / STUDY_MANIFEST).read_text())["files"].items()
         if not path.endswith("generation.json") and "manifest" not in path}
        for f in (deployed, folder)
    ]  # fmt: skip
    assert files[0] == files[1]
    assert "analysis/registered/hypotheses.json" in files[0] and len(files[0]) > 10, sorted(files[0])


@pytest.mark.slow
def test_the_wheel_installed_in_a_clean_venv_runs_a_deployed_study_to_its_audit(wheel, deployed_study):
    """The wheel's cotdyn is the one the deployed study ran with (deployed_study: the four steps to the
    audit's PASS by the venv's interpreter, with no PYTHONPATH); the sdist ships the bundled files."""
    assert wheel.sdist["src/cotdyn/bundled/preregistration/plan.yaml"].isfile()  # copies, not links
    assert wheel.sdist["src/cotdyn/plan/config.schema.yaml"].isfile()
    folder, audit = deployed_study
    where = wheel.run(folder, "cotdyn.cli.main", "--version")
    assert where.returncode == 0 and where.stdout.strip() == f"cotdyn {version('cotdyn')}", where.output
    origin = subprocess.run([wheel.python, "-c", "import cotdyn; print(cotdyn.__file__)"], cwd=folder, env=clean(),
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert origin.stdout.strip().startswith(str(wheel.venv)), origin.stdout + origin.stderr
    assert "audit of results/mine: PASS" in audit.output
    assert str(ROOT) not in every_text(folder)


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


def test_init_and_ls_read_the_shipped_plans_where_the_working_directory_has_none(tmp_path, monkeypatch, capsys):
    from cotdyn.cli.init import REGISTERED_PLAN, write_skeleton
    from cotdyn.cli.ls import cmd_ls

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "problems.jsonl"
    data.write_text('{"question": "What is 1 + 1?", "gold": "2"}\n')
    fields = {"question": "question", "gold": "gold"}
    write_skeleton(tmp_path / "mine", str(data), "number", fields, backend="simulated")
    assert f"({ROOT / REGISTERED_PLAN})" in (tmp_path / "mine/plan.yaml").read_text()
    args = SimpleNamespace(kinds=["plans"], json=True, preregistration="preregistration")
    capsys.readouterr()
    assert cmd_ls(args) == 0
    paths = {row["path"] for row in json.loads(capsys.readouterr().out)["plans"]}
    assert str(ROOT / REGISTERED_PLAN) in paths and all(p.startswith(str(ROOT / "preregistration")) for p in paths)
    (tmp_path / "preregistration").mkdir()  # a folder of the working directory wins, though it holds none
    assert cmd_ls(args) == 0 and json.loads(capsys.readouterr().out)["plans"] == []


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
