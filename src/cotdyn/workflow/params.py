"""The rules' params: what a job reads, so that Snakemake's params trigger reruns a job exactly when
what it reads changes, and a code hash per script (``code_of``) for what it runs.

A rule's params hold only what its job reads (``config_part``); generation's model entry leaves out
the keys no sample depends on (``PERFORMANCE_KEYS``), so editing them reruns nothing.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Callable

from cotdyn.provenance.code import code_hash
from cotdyn.workflow.study import Study

# Model entry keys no sample depends on: the cluster request (the scheduler's, not the backend's) and
# chunk_size (how requests are grouped into cache shards; a resumed or re-chunked run reads the same
# samples from the cache). A generation job reads chunk_size from the config itself
# (workflow/scripts/reference.py).
PERFORMANCE_KEYS = ("resources", "chunk_size")

# the folder the running cotdyn package lies in: a checkout's src/, or site-packages where it is installed
SOURCE = Path(__file__).resolve().parents[2]

# what a job's own process gives as a code hash: it never compares params, the run's process does
NOT_HASHED = "recorded by the run's process"


def config_part(config: dict, keys) -> dict:
    """The parts of the config a rule reads, as its param (a config edit elsewhere, a performance
    knob such as a model's chunk_size, leaves the rule's jobs and the jobs below them alone)."""
    return {k: config[k] for k in keys if k in config}


def model_for(study: Study, cell: str) -> dict:
    """The cell's model entry as the backend sees it (PERFORMANCE_KEYS left out), pointing at the
    converted weights when it ships as GGUF."""
    spec = study.cells[cell]
    model = {k: v for k, v in spec.model.items() if k not in PERFORMANCE_KEYS}
    model["dtype"] = study.protocols[study.variants[0]]["dtype"]
    if "gguf" in model:
        model["id"] = f"results/models/{spec.model_key}"
    return model


def conversion_for(config: dict, model: str) -> dict:
    """Rule prepare_model's params for ``model``: its ``gguf:`` file."""
    return {"gguf": config["models"][model]["gguf"]}


def records_params(workflow) -> bool:
    """Whether this process records the jobs' params (.snakemake/metadata): the run's own process, and
    a job's process under --immediate-submit."""
    return bool(workflow.is_main_process or getattr(workflow.remote_execution_settings, "immediate_submit", False))


class CodeHashes:
    """A rule's code trigger, a param: the hash of workflow/scripts/<script> (its local path given by
    ``script_path``) and of every cotdyn module under ``src`` it imports (cotdyn.provenance.code),
    normalised so that comments and docstrings do not count.
    The profiles drop Snakemake's own `code` trigger (a script's mtime); docs/developer-notes.md.
    Computed when a job of the rule is planned, once per script, and only by a process that records
    params (``records_params``): a job's process skips the parsing."""

    def __init__(self, workflow, script_path: Callable[[str], str | Path], src: Path = SOURCE):
        self.workflow = workflow
        self.script_path = script_path
        self.src = Path(src)
        self.hash = cache(self._hash)

    def _hash(self, script: str) -> str:
        if not records_params(self.workflow):
            return NOT_HASHED
        return code_hash(Path(self.script_path(script)), self.src)

    def of(self, script: str):
        """The param of a rule running ``script``: a function of the job's wildcards."""
        return lambda wildcards: self.hash(script)
