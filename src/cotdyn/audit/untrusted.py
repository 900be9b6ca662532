"""A study folder handed to a reviewer is untrusted input (docs/tamper-evidence.md, "Threat model").

Before the audit reads anything else it admits the folder (``admit``): no symlink anywhere in it
(``report/`` and ``logs/`` included), a manifest that is a JSON object with a config, a config
that passes the run's own schema (``cotdyn.plan.schema``), and a plan and a cache that lie inside
the folders the reviewer trusts (``trusted_roots``) unless the reviewer named them. Each refusal
names the file, the field and what was expected.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from cotdyn.audit.locate import locate_plan, not_found_message
from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.files.terminal import printable
from cotdyn.generation.backends.validation import validate_config
from cotdyn.plan.config import ConfigError
from cotdyn.plan.load import load_plan
from cotdyn.plan.registration import sibling_paths
from cotdyn.plan.schema import CHECKOUT

MAX_MANIFEST_BYTES = 64 << 20  # a manifest lists hashes: a large study's is a few MB
MANIFEST_FIELDS = {"config": dict, "files": dict, "plan_sha256": str, "config_sha256": str}


class Refused(ValueError):
    """The study folder cannot be audited as it is; the message names why."""


@dataclass(frozen=True)
class Admitted:
    manifest: dict
    config: dict
    plan_path: Path
    plan: dict
    cache_dir: Path | None  # None: no cache to compare with (see cache_note)
    cache_note: str


def study_links(study_dir: Path) -> list[str]:
    """Every symlink inside the study folder (files and folders, never followed), relative."""
    links = []
    for folder, dirs, files in os.walk(study_dir, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if path.is_symlink():
                links.append(path.relative_to(study_dir).as_posix())
    return sorted(links)


def refuse_links(study_dir: Path) -> None:
    links = study_links(study_dir)
    if links:
        shown = ", ".join(printable(link) for link in links[:10]) + (
            f" and {len(links) - 10} more" if len(links) > 10 else ""
        )
        raise Refused(
            f"{study_dir}: {len(links)} symlink(s) inside the study folder ({shown}): a study holds its own files; "
            "nothing was read (replace each link with a copy of what it points to)"
        )


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (the manifest holds finite numbers only)")


def read_manifest(path: Path) -> dict:
    """The study manifest, checked for shape: a JSON object with the fields in MANIFEST_FIELDS."""
    if not path.is_file():
        raise Refused(f"{path} not found: the study has no manifest to audit against")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise Refused(
            f"{path}: {path.stat().st_size} bytes, more than a manifest may hold (MAX_MANIFEST_BYTES = {MAX_MANIFEST_BYTES} in cotdyn.audit.untrusted)"
        )
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Refused(f"{path}: not a JSON manifest ({printable(str(e))[:300]})") from None
    if not isinstance(manifest, dict):
        raise Refused(f"{path}: expected a JSON object, got a {type(manifest).__name__}")
    for key, kind in MANIFEST_FIELDS.items():
        if not isinstance(manifest.get(key), kind):
            got = "nothing" if key not in manifest else f"a {type(manifest[key]).__name__}"
            raise Refused(f"{path}: field {key}: expected a {kind.__name__}, got {got}")
    bad = [k for k, v in manifest["files"].items() if not isinstance(v, str)]
    if bad:
        raise Refused(f"{path}: field files.{printable(bad[0])}: expected a sha256 string")
    return manifest


def trusted_roots(study_dir: Path) -> list[Path]:
    """Where a path a study names may lead: the study folder, the folder its ``results/`` lies in
    (the workflow folder the reviewer placed it in) and the checkout of the code auditing it."""
    study = study_dir.resolve()
    roots = [study, CHECKOUT]
    if study.parent.name == "results":
        roots.append(study.parents[1])
    return roots


def inside(path: Path, roots: list[Path]) -> bool:
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(root) for root in roots)


def outside_message(what: str, named, field: str) -> str:
    return (
        f"{what} {printable(str(named))} (field {field} of {STUDY_MANIFEST}) lies outside the study folder, "
        "the folder its results/ lies in and the checkout: not opened"
    )


def admitted_plan(study_dir: Path, config: dict, manifest: dict, plan_path) -> Path:
    """The plan the reviewer named, or the config's plan if it lies inside the trusted roots."""
    if plan_path is not None:  # the reviewer's own choice
        if not Path(plan_path).is_file():
            raise Refused(f"plan {plan_path} (given with --plan) not found")
        return Path(plan_path)
    roots = trusted_roots(study_dir)
    found = locate_plan(study_dir, config["plan"], manifest.get("plan_sha256"), roots)
    if found is None:
        anywhere = locate_plan(study_dir, config["plan"], None)
        if anywhere is not None:
            raise Refused(outside_message("plan", config["plan"], "config.plan") + "; name it with --plan")
        raise Refused(not_found_message(study_dir, printable(config["plan"])))
    outside = [p for p in sibling_paths(found) if p.exists() and not inside(p, roots)]
    if outside:
        raise Refused(outside_message("the plan's sibling", outside[0], "config.plan") + "; name the plan with --plan")
    return found


def admitted_cache(study_dir: Path, config: dict, cache) -> tuple[Path | None, str]:
    """The cache the reviewer named, or the config's cache if it lies inside the trusted roots;
    otherwise None and why (the raw files are then checked against their seals only)."""
    if cache is not None:
        return Path(cache), ""
    named = Path(config.get("cache", "results/cache"))
    roots = trusted_roots(study_dir)
    if not named.is_absolute() and len(roots) > 2:  # relative to the workflow folder, as a run saw it
        named = roots[2] / named
    if not inside(named, roots):
        return None, outside_message(
            "generation cache", config.get("cache"), "config.cache"
        ) + " (name it with --cache)"
    return named, ""


def admit(study_dir, plan_path=None, cache=None) -> Admitted:
    """The study's manifest, config, plan and cache, each checked before anything else is read."""
    study_dir = Path(study_dir)
    if not study_dir.is_dir():
        raise Refused(f"{study_dir}: not a folder")
    refuse_links(study_dir)
    manifest_path = study_dir / STUDY_MANIFEST
    manifest = read_manifest(manifest_path)
    try:
        # the run's schema, with the backend registry filled in
        config = validate_config(manifest["config"], f"{manifest_path} (config)")
    except ConfigError as e:
        raise Refused(printable(str(e))) from None
    path = admitted_plan(study_dir, config, manifest, plan_path)
    try:
        plan = load_plan(path)
    except (ValueError, OSError) as e:
        raise Refused(f"plan not read: {printable(str(e))}") from None
    cache_dir, note = admitted_cache(study_dir, config, cache)
    return Admitted(manifest, config, path, plan, cache_dir, note)
