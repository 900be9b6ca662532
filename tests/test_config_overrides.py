"""The README's and docs' --config commands, as written, plan (dry run) on top of the default config."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [
    ["--config", "plan=preregistration/v1/plan.yaml"],  # docs/reference.md section 7
    ["--config", "extras=[dynamics,exploratory]"],  # README: nested, typed by the schema
]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")
@pytest.mark.parametrize("args", COMMANDS, ids=["plan", "extras"])
def test_config_override_keeps_the_default(args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(["snakemake", "-n", "--cores", "2", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "is a required property" not in run.stderr and "is not of type" not in run.stderr


def dry_run(*args, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(["snakemake", "-n", "--cores", "2", *args], cwd=cwd, env=env, capture_output=True, text=True)


def error_of(run) -> str:
    """The one line a refused run's error says (Snakemake prints it under 'WorkflowError in file ...')."""
    output = run.stdout + run.stderr  # Snakemake's logger writes it on stdout
    lines = output.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("WorkflowError")), None)
    assert at is not None and "Traceback" not in output, output[-2000:]
    return lines[at + 1]


# Issue 53: nested values arrive typed; an error names the override; the embedded default's cell is
# confirmatory, so an override of a registered value is a deviation, refused at the dry run naming
# its deviations.yaml, unless the cell is made descriptive (confirmatory=[]).
DEFAULT_DEVIATIONS = "preregistration/examples/default/deviations.yaml"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")
def test_the_developer_notes_second_study_is_typed_and_refused_as_a_deviation():
    # a second study of the embedded default with its seed overridden
    run = dry_run("--config", "study=second", "protocol={dtype: float32, seed: 1}")
    assert run.returncode == 1 and "is not of type" not in run.stdout + run.stderr
    assert error_of(run) == (
        "plan of config/config.yaml: cell smollm2-additions: protocol parameter 'seed' is 1 but the plan registers "
        f"20260829, and {DEFAULT_DEVIATIONS} declares no such deviation (declare it there, or drop the override)"
    )
    assert dry_run("--config", "study=second", "protocol={dtype: float32, seed: 1}", "confirmatory=[]").returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")
def test_a_nested_number_plans_and_a_bad_one_names_its_override():
    run = dry_run("--config", "protocol={continuation_temperature: 0.5}", "confirmatory=[]")
    assert run.returncode == 0, run.stderr[-2000:]
    run = dry_run("--config", "protocol={m: five}")
    assert error_of(run) == "--config protocol={m: five}: field protocol.m: 'five' is not of type 'integer'"
    run = dry_run("--config", "token_budget=1000")
    assert "more than its token budget of 1,000" in error_of(run)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")
def test_plan_drift_and_bad_plan_values_stop_the_dry_run_naming_the_studys_files(tmp_path):
    from cotdyn.cli.init import write_skeleton
    from cotdyn.plan.registration import register

    (tmp_path / "p.jsonl").write_text('{"id": "a", "question": "What is 1 + 1?", "gold": "2"}\n')
    config, plan, deviations = write_skeleton(
        tmp_path / "mine", str(tmp_path / "p.jsonl"), "number", {"question": "question", "gold": "gold", "id": "id"},
        backend="simulated", registered_plan=str(ROOT / "preregistration" / "plan.yaml"),
    )  # fmt: skip
    register(plan, plan.with_name("REGISTERED"), "2026-12-01")
    cell = "sim-p"
    run = dry_run("--configfile", str(config), "--config", "protocol={reference_max_tokens: 100}")
    assert error_of(run) == (
        f"plan of {config}: cell {cell}: protocol parameter 'reference_max_tokens' is 100 but the plan registers "
        f"600, and {deviations} declares no such deviation (declare it there, or drop the override)"
    )
    rows = (tmp_path / "p.jsonl").read_text()
    (tmp_path / "p.jsonl").write_text(rows + '{"id": "b", "question": "q", "gold": "1", "gold": "2"}\n')
    run = dry_run("--configfile", str(config))
    assert error_of(run) == (
        f"{config}: benchmarks.p: {tmp_path / 'p.jsonl'}: line 2: key 'gold' appears twice in one object (which "
        "value a reader takes depends on the reader); write it once"
    )
    (tmp_path / "p.jsonl").write_text(rows)
    plan.write_text(plan.read_text().replace("  m: 5\n", "  m: 1000000000\n", 1))
    run = dry_run("--configfile", str(config))
    assert error_of(run) == f"plan {plan}: protocol.m: 1000000000 is greater than the maximum of 256"
    plan.write_text(plan.read_text().replace("  m: 1000000000\n", "  m: 6\n", 1))
    message = error_of(dry_run("--configfile", str(config)))
    assert message.startswith(f"plan of {config}: {plan} has sha256 ") and "edited after registration" in message
    # a reviewer's `snakemake audit` still plans: the audit names the drift in its report
    assert dry_run("audit", "--configfile", str(config)).returncode == 0
