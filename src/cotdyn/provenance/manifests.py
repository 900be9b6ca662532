"""Provenance (docs/reference.md section 7): a manifest per cell and a study manifest hashing every output.

The cell manifest says what produced the cell: code (git), plan and config hashes, model and
tokenizer, the sampling parameters the backend actually used (from generation.json), the dataset,
package versions, hardware, seeds, token totals and wall time. The study manifest holds the
filled config and the sha256 of every output file, which ``cotdyn.audit.check`` re-derives and compares.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from cotdyn.dataset.benchmarks import content_sha256, problems_from_table
from cotdyn.files.layout import REPORT_DIR, STUDY_MANIFEST

EXCLUDED_DIRS = ("logs", REPORT_DIR)  # logs carry timings and paths; report pages follow the manifest
PACKAGES = (
    "cotdyn",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "statsmodels",
    "scikit-learn",
    "matplotlib",
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "math-verify",
    "snakemake",
    "vllm",
)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def fill_config_defaults(config: dict, schema_path: str | Path) -> dict:
    """The config as the workflow sees it: validated, with the schema's defaults filled in."""
    from snakemake.utils import validate

    filled = copy.deepcopy(config)
    validate(filled, str(Path(schema_path).resolve()))
    return filled


def config_sha256(config: dict) -> str:
    """sha256 of the canonical JSON of the (defaults-filled) config."""
    return hashlib.sha256(canonical_json(config)).hexdigest()


def git_state(root: str | Path = ".") -> dict:
    """Commit and dirty flag of the checkout at ``root`` (null when it is not a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip() if commit else None, "dirty": None if status is None else bool(status.strip())}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions (null when a package, e.g. vllm on a laptop, is not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def backend_packages(generation: dict[str, dict]) -> dict[str, str | None]:
    """The versions the generation logs recorded (``packages``, from the backend's declaration). Phases
    run in one environment agree; where they do not, each version is kept, by phase, so that nothing
    is hidden."""
    seen: dict[str, dict[str, str | None]] = {}
    for phase, log in sorted(generation.items()):
        for name, version in (log.get("packages") or {}).items():
            seen.setdefault(name, {})[phase] = version
    return {name: (next(iter(set(v.values()))) if len(set(v.values())) == 1 else v) for name, v in seen.items()}


def hardware() -> dict:
    """The machine writing the manifest; the generating device is in each backend description."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "cuda_device": cuda_device(),
    }


def cuda_device() -> str | None:
    """The first CUDA device's name, or None. Torch is asked only where the CUDA driver's library is
    installed (libcuda, nvcuda on Windows), without which it finds no device: importing torch took
    a cell manifest job 1.7 of its 1.8 s on a machine without one."""
    import ctypes.util

    if ctypes.util.find_library("cuda") is None and ctypes.util.find_library("nvcuda") is None:
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def problems_sha256(problems_path: str | Path) -> str:
    """content_sha256 of the problems the cell actually used (after any limit)."""
    return content_sha256(problems_from_table(pd.read_parquet(problems_path)))


def generation_totals(generation: dict[str, dict]) -> dict:
    keys = ("requests", "cached_requests", "samples", "prompt_tokens", "generated_tokens")
    totals = {k: int(sum(g.get(k, 0) for g in generation.values())) for k in keys}
    return totals | {"seconds": round(sum(float(g.get("seconds", 0.0)) for g in generation.values()), 3)}


def dataset_entry(benchmark: dict, used_sha256: str) -> dict:
    hub = benchmark.get("hub") or {}
    return {
        "kind": benchmark.get("kind"),
        "id": hub.get("repo"),
        "revision": hub.get("revision"),
        "path": benchmark.get("path"),
        "limit": benchmark.get("limit"),
        "pinned_content_sha256": benchmark.get("content_sha256"),
        "content_sha256": used_sha256,
    }


def model_entry(model: dict, generation: dict[str, dict]) -> dict:
    """Model id and resolved revision as the backend reported them, over the config's entry."""
    described = next(iter(generation.values()), {}).get("backend", {}) if generation else {}
    return {
        "key": None,
        "backend": model.get("backend"),
        "id": described.get("model_id", model.get("id")),
        "requested_revision": model.get("revision"),
        "revision": described.get("revision", model.get("revision")),
        "dtype": described.get("dtype"),
        "device": described.get("device"),
        "tokenizer_sha256": described.get("tokenizer_sha256"),
        "chat_template_sha256": described.get("chat_template_sha256"),
        # the content hash of the weight files loaded (transformers; regeneration refuses others)
        "weights_sha256": described.get("weights_sha256"),
        "weights_commit": described.get("weights_commit"),
    }


def cell_manifest(
    cell,
    protocols: dict[str, dict],
    generation: dict[str, dict],
    dataset_sha256: str,
    plan_sha256: str,
    config_sha256: str,
    git: dict,
    packages: dict,
    machine: dict,
    declared: dict,
) -> dict:
    """The manifest of one cell (``cell`` a cotdyn.plan.config.Cell); ``generation`` maps phase names
    (reference/<ref>, <variant>) to their generation.json content."""
    model = model_entry(cell.model, generation) | {"key": cell.model_key}
    return {
        "cell": cell.name,
        "git": git,
        "plan_sha256": plan_sha256,
        "config_sha256": config_sha256,
        "model": model,
        "dataset": dataset_entry(cell.benchmark, dataset_sha256),
        "protocols": protocols,
        "seeds": {v: p["seed"] for v, p in protocols.items()},
        "effective_sampling": {phase: g.get("effective_sampling") for phase, g in generation.items()},
        "generation": {
            phase: {k: v for k, v in g.items() if k not in ("backend", "effective_sampling")}
            for phase, g in generation.items()
        },
        "backend": {phase: g.get("backend") for phase, g in generation.items()},
        "totals": generation_totals(generation),
        "packages": packages,
        # the backend's own package and those its declaration names, as the generation jobs had them
        "backend_packages": backend_packages(generation),
        "hardware": machine,
        "plan_check": declared,
    }


class ManifestError(ValueError):
    pass


def output_hashes(study_dir: str | Path) -> dict[str, str]:
    """sha256 of every output under the study directory, by posix path relative to it, except logs
    and the study manifest itself. A symlink inside the study (a linked ``cells/`` folder, a linked
    file) is refused with its path: the manifest hashes what the study holds, and a link's target
    can change under it."""
    study_dir = Path(study_dir)
    hashes = {}
    for path in sorted(study_dir.rglob("*")):
        rel = path.relative_to(study_dir).as_posix()
        if rel.split("/")[0] in EXCLUDED_DIRS:
            continue
        if path.is_symlink():
            raise ManifestError(
                f"{path} is a symlink (to {os.readlink(path)}) inside the study: the manifest hashes only what "
                "the study holds; replace the link with a copy of what it points to"
            )
        if not path.is_file() or rel == STUDY_MANIFEST:
            continue
        hashes[rel] = file_sha256(path)
    return hashes


def study_manifest(
    study: str, config: dict, plan_sha256: str, git: dict, files: dict[str, str], plugins: dict | None = None
) -> dict:
    return {
        "study": study,
        "plan_sha256": plan_sha256,
        "config": config,
        "config_sha256": config_sha256(config),
        "git": git,
        # the release that made it (the cell manifests list it among their packages too)
        "cotdyn": package_versions(("cotdyn",))["cotdyn"],
        # what an audit must have installed (cotdyn.provenance.plugins.study_plugins, cotdyn.audit.plugins)
        "plugins": plugins or {},
        "files": files,
    }


# --- I/O -------------------------------------------------------------------------------------


def read_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def write_cell_manifest(
    cell,
    protocols: dict[str, dict],
    generation_paths: dict[str, str],
    problems_path,
    plan_path,
    config: dict,
    plan_check_path,
    out,
    root: str | Path = ".",
    plugin_packages: tuple[str, ...] = (),
) -> dict:
    """``plugin_packages``: the distributions of the study's plugins (cotdyn.provenance.plugins), whose
    versions are recorded beside cotdyn's."""
    from cotdyn.files.writers import write_json
    from cotdyn.plan.load import plan_sha256

    generation = {phase: read_json(p) for phase, p in sorted(generation_paths.items())}
    declared = read_json(plan_check_path)["cells"].get(cell.name, {})
    manifest = cell_manifest(
        cell,
        protocols,
        generation,
        problems_sha256(problems_path),
        plan_sha256(plan_path),
        config_sha256(config),
        git_state(root),
        package_versions(PACKAGES + plugin_packages),
        hardware(),
        declared,
    )
    write_json(manifest, out)
    return manifest


def write_study_manifest(
    study_dir, study: str, config: dict, plan_path, root: str | Path = ".", plugins: dict | None = None
) -> dict:
    from cotdyn.files.writers import write_json
    from cotdyn.plan.load import plan_sha256

    manifest = study_manifest(study, config, plan_sha256(plan_path), git_state(root), output_hashes(study_dir), plugins)
    write_json(manifest, Path(study_dir) / STUDY_MANIFEST)
    return manifest
