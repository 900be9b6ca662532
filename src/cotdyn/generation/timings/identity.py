"""What a timing observation is keyed by: the model, the settings that change its speed, the machine,
and the work (what shapes a phase's requests)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from pathlib import Path

from cotdyn.generation.backends import registry
from cotdyn.plan.config import REFERENCE_FIELDS

# The protocol parameters that shape a continuations job's requests beyond its chains (which the
# reference fields shape): how the prefixes are cut, and how many samples of each are drawn and how
# (cotdyn.generation.requests.prefix_plan, continuation_requests, continuation_sampling). The endpoint enters only
# as whether the reasoning cut moves the last prefix.
CONTINUATION_FIELDS = (
    "m",
    "continuation_temperature",
    "continuation_max_tokens",
    "checkpoints",
    "checkpoint_stride",
    "segmentation",
    "cap",
)


def model_identity(model: dict) -> str:
    """The model a config entry names, known before any weights load: what its backend's declaration
    says (``identity``: the simulated model's planted truth, a served model's name and revision), else
    a GGUF file of a package (at the package's installed version), a hub id at its pinned revision,
    or a local directory (by its weight files' names, sizes and times: a changed file makes it
    another model)."""
    declared = registry.spec(model.get("backend"))
    if declared.identity is not None:
        return declared.identity(model, registry.options(model))
    gguf = model.get("gguf")
    if gguf:
        return f"gguf {gguf.get('package')}=={_package_version(gguf.get('package'))}/{gguf.get('file')}"
    model_id = str(model.get("id"))
    if model.get("revision"):
        return f"{model_id}@{model['revision']}"
    path = Path(model_id)
    if path.is_dir():
        return f"{model_id} (local {_directory_fingerprint(path)})"
    return f"{model_id} (unpinned)"


def _package_version(package) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(str(package))
    except (PackageNotFoundError, ValueError):
        return "not installed"


def _directory_fingerprint(path: Path) -> str:
    """Names, sizes and modification times of the weight and config files: cheap, unlike hashing
    gigabytes of weights at every start."""
    entries = [
        (f.name, f.stat().st_size, f.stat().st_mtime_ns)
        for f in sorted(path.iterdir())
        if f.is_file() and f.suffix in (".safetensors", ".json", ".bin")
    ]
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:12]


def speed_settings(model: dict) -> dict:
    """The settings of a model entry that change generation speed: its backend, chunk size and what
    the backend's declaration names (``speed``), with the option defaults the backend applies, so an
    entry that spells a default out matches one that leaves it implicit."""
    declared = registry.spec(model.get("backend"))
    settings = {"backend": declared.name, "chunk_size": model.get("chunk_size", 0)}
    return settings | declared.speed(model, registry.options(model))


def machine() -> dict:
    """The hardware generation runs on: CPU model and counts, GPU models (read from the driver's files,
    without starting CUDA, so the start of a run stays quick). Not the host's name: the alike nodes
    of a cluster, or fresh CI machines, share their timings."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_model": _cpu_model(), "cpus": os.cpu_count(), "usable_cpus": usable, "gpus": _gpu_models()}


def _cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu_models(root: Path = Path("/proc/driver/nvidia/gpus")) -> list[str]:
    models = []
    for info in sorted(root.glob("*/information")) if root.is_dir() else []:
        try:
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    models.append(line.split(":", 1)[1].strip())
        except OSError:
            continue
    return models


def torch_threads() -> int | None:
    """Torch's intra-op thread count where this process uses torch (the simulated model does not)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def request_fields(protocol: dict, phase: str) -> dict:
    """The protocol parameters that shape ``phase``'s requests: the reference chain's, and for
    continuations also how prefixes are cut and sampled, and whether the reasoning cut applies."""
    fields = {key: protocol[key] for key in REFERENCE_FIELDS}
    if phase == "continuations":
        fields |= {key: protocol[key] for key in CONTINUATION_FIELDS}
        fields["reasoning_cut"] = protocol["endpoint"] == "reasoning"
    return fields


def budgets(protocol: dict, phase: str) -> dict:
    """What sets how long ``phase``'s generations are: its request fields but the seed, so that
    timings of other seeds tell the length of this one's."""
    return {k: v for k, v in request_fields(protocol, phase).items() if k != "seed"}


def work(
    phase: str,
    model: dict,
    cell: str,
    benchmark: str,
    protocol: dict,
    problems: int | None,
    benchmark_entry: dict | None = None,
) -> str | None:
    """A digest of what decides a phase's requests, from what the start of a run knows: the model, the
    cell (request seeds derive from its name), the benchmark (its answer rule and its entry, see
    ``problem_source``), the problem count and the protocol fields that shape the requests. None when
    the problem count is unknown."""
    if problems is None:
        return None
    identity = {
        "phase": phase,
        "model": model_identity(model),
        "cell": cell,
        "benchmark": benchmark,
        "problem_source": problem_source(benchmark_entry),
        "problems": problems,
        "protocol": request_fields(protocol, phase),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]


def problem_source(entry: dict | None) -> dict | None:
    """A benchmark entry as it decides the problems: its fields (kind, n, seed, hub revision, content
    hash, ...) and, for a file it reads, the file's sha256, so an edited file is other work."""
    if entry is None:
        return None
    source = dict(entry)
    path = Path(str(entry["path"])) if entry.get("path") else None
    if path is not None:
        source["path_sha256"] = _file_sha256(path) if path.is_file() else "missing"
    return source


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
