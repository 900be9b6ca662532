"""Where the workflow's jobs run: the checkout's code, and the conda environment of each job.

The run and its jobs import the same cotdyn, the checkout's ``src/`` (the code the rules' code hashes
follow), not whatever cotdyn is installed; envs/*.yaml install cotdyn and the lock from
``${COTDYN_ROOT}``, the checkout. A generation job's environment is the one its backend declares
(cotdyn.generation.backends.registry).
"""

from __future__ import annotations

import os
from pathlib import Path

from cotdyn.generation.backends import registry as backend_registry

# envs/ as a rule's ``conda:`` names it: relative to workflow/rules/, where the rules are declared
ENVS = "../../envs"


def use_checkout(root: Path, environ=os.environ) -> None:
    """Put the checkout's ``src/`` first on PYTHONPATH, which every job's process inherits (on a
    cluster too), and set COTDYN_ROOT, which pip expands in envs/*.yaml: conda runs pip beside a copy
    of the env file under .snakemake/conda/, where a relative ``..`` is not this checkout. Both set
    here, not asked of the user (no ``envvars:``, which asserts a variable the user must define)."""
    src = str(Path(root) / "src")
    if environ.get("PYTHONPATH", "").split(os.pathsep)[0] != src:
        environ["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [environ.get("PYTHONPATH")])])
    environ["COTDYN_ROOT"] = str(root)


def env_file(name: str) -> str:
    """The ``conda:`` path of the environment ``name`` (envs/<name>.yaml)."""
    return f"{ENVS}/{name}.yaml"


def torch_env(device) -> str:
    """The environment of a job that runs torch on ``device``: the CUDA build on a GPU."""
    return env_file("generate-cuda" if str(device).startswith("cuda") else "generate-cpu")


def generation_env(model: dict) -> str:
    """The environment of a generation job: the one its backend's declaration names for the model
    entry (cotdyn.generation.backends.registry.environment_for: vLLM's for a vllm model, torch's for
    its device, or a plugin's own file)."""
    return backend_registry.environment_for(model, ENVS)


def infogain_env(traces: dict | None) -> str:
    """The environment of infogain_cell: torch's, for the supervisor's device (CPU when the config
    has no infogain.traces)."""
    return torch_env(traces["supervisor"].get("device", "cpu") if traces else "cpu")


def in_conda_envs(workflow) -> bool:
    """Whether the run deploys the rules' conda environments (``--sdm conda``, or a profile's
    ``software-deployment-method``): its jobs then run in them, not in this environment."""
    from snakemake.settings.types import DeploymentMethod

    settings = getattr(workflow, "deployment_settings", None)
    return settings is not None and DeploymentMethod.CONDA in settings.deployment_method
