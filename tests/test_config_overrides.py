"""The README's and docs' --config commands, as written, plan (dry run) on top of the default config."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [
    ["--config", "plan=preregistration/v1/plan.yaml"],  # docs/design.md
    ["infogain", "--config", "infogain={size: full, seed: 0}"],  # README: nested, typed by the schema
]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")
@pytest.mark.parametrize("args", COMMANDS, ids=["plan", "infogain"])
def test_config_override_keeps_the_default(args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(["snakemake", "-n", "--cores", "2", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "is a required property" not in run.stderr and "is not of type" not in run.stderr
