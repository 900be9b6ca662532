"""A study folder handed to a reviewer is untrusted input (docs/tamper-evidence.md, "Threat model").

Before the audit reads anything else it admits the folder, once (``admit``): no symlink, FIFO,
device, socket or file hard-linked from outside anywhere in it (``report/`` and ``logs/`` included),
at most MAX_STUDY_FILES entries, a manifest read strictly (``cotdyn.files.strict``) that is a JSON
object with a config, a config that passes the run's own schema (``cotdyn.plan.schema``), a plan
that lies inside the folders the reviewer trusts (``trusted_roots``) unless the reviewer named it,
loaded with its time lock, the cells and protocols the config resolves to under it, and a cache
inside the trusted folders unless named. Each refusal names the file, the field and what was
expected. Everything the audit checks afterwards it reads from the admission and through the view
built on its walk (``cotdyn.audit.view``).
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cotdyn.audit.plugins import pinned_plugin_problems
from cotdyn.audit.raw import raw_files
from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.files.strict import MissingFile, UntrustedFileError, kind_of, read_json
from cotdyn.files.terminal import printable
from cotdyn.generation.backends.registry import options_moved
from cotdyn.generation.backends.validation import plugin_problems, validate_config
from cotdyn.plan.config import ConfigError, bundled_roots, resolve_cells, study_protocols
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import sibling_paths
from cotdyn.plan.schema import without_toy_keys
from cotdyn.plugins import PluginError
from cotdyn.protocol.signals import study_signals

MAX_MANIFEST_BYTES = 64 << 20  # a manifest lists hashes: a large study's is a few MB
MANIFEST_FIELDS = {"config": dict, "files": dict, "plan_sha256": str, "config_sha256": str}


class Refused(ValueError):
    """The study folder cannot be audited as it is; the message names why."""


@dataclass(frozen=True)
class Admitted:
    manifest: dict
    config: dict
    plan_path: Path
    plan: dict  # loaded with its time lock (cotdyn.plan.load)
    cells: dict  # the config's cells under the plan (cotdyn.plan.config.resolve_cells)
    protocols: dict[str, dict]  # each variant's effective protocol
    raw: dict[str, tuple[str, str, str | None]]  # the raw files these name (cotdyn.audit.raw.raw_files)
    cache_dir: Path | None  # None: no cache to compare with (see cache_note)
    cache_note: str
    # the admission's one walk of the folder: every entry (relative posix path) and its lstat, which
    # every later step reads instead of listing the folder again (cotdyn.audit.view)
    entries: dict[str, os.stat_result] = field(default_factory=dict)


MAX_STUDY_FILES = 1_000_000  # a study of 10,000 cells holds some 100,000 files


def _walk(study_dir: Path):
    """(relative path, lstat) of every entry in the study folder, links never followed, without
    recursion; a Refused past MAX_STUDY_FILES (a folder of millions of files is not walked to the end)."""
    folders, count = [study_dir], 0
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                count += 1
                if count > MAX_STUDY_FILES:
                    raise Refused(
                        f"{study_dir}: more than {MAX_STUDY_FILES} files (MAX_STUDY_FILES in cotdyn.audit.untrusted); "
                        "nothing was read"
                    )
                st = entry.stat(follow_symlinks=False)
                yield Path(entry.path).relative_to(study_dir).as_posix(), st
                if stat.S_ISDIR(st.st_mode):
                    folders.append(Path(entry.path))


def _shown(paths: list[str]) -> str:
    return ", ".join(printable(p) for p in paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")


def refuse_links(study_dir: Path) -> dict[str, os.stat_result]:
    """Refuse a study folder holding a symlink, a FIFO, a device or a socket (each named by kind:
    a FIFO blocks whoever opens it, a device never ends), or a file hard-linked from outside it (its
    bytes can change from there after the audit hashed them); past MAX_STUDY_FILES, refuse unwalked.
    Otherwise its entries, by relative path, as the one walk found them."""
    entries = list(_walk(study_dir))
    links = sorted(rel for rel, st in entries if stat.S_ISLNK(st.st_mode))
    if links:
        raise Refused(
            f"{study_dir}: {len(links)} symlink(s) inside the study folder ({_shown(links)}): a study holds its own files; "
            "nothing was read (replace each link with a copy of what it points to)"
        )
    special = [
        f"{rel} ({kind})"
        for rel, st in entries
        if not stat.S_ISDIR(st.st_mode) and (kind := kind_of(st.st_mode)) is not None
    ]
    if special:
        raise Refused(
            f"{study_dir}: {len(special)} entr(ies) that are not regular files ({_shown(special)}): a study holds "
            "files and folders only; nothing was read"
        )
    inside_links = Counter((st.st_dev, st.st_ino) for _, st in entries if stat.S_ISREG(st.st_mode))
    shared = [
        rel for rel, st in entries if stat.S_ISREG(st.st_mode) and st.st_nlink > inside_links[(st.st_dev, st.st_ino)]
    ]
    if shared:
        raise Refused(
            f"{study_dir}: {len(shared)} file(s) hard-linked from outside the study folder ({_shown(shared)}): "
            "their bytes can change from there; nothing was read (replace each with a copy: cp, not cp -l)"
        )
    return dict(entries)


def read_manifest(path: Path) -> dict:
    """The study manifest, read strictly (cotdyn.files.strict: a regular file, bounded in bytes and
    depth, no key twice, no NaN) and checked for shape: a JSON object with the fields in MANIFEST_FIELDS."""
    try:
        manifest = read_json(path, max_bytes=MAX_MANIFEST_BYTES)
    except MissingFile:
        raise Refused(f"{path} not found: the study has no manifest to audit against") from None
    except UntrustedFileError as e:
        bound = " (MAX_MANIFEST_BYTES in cotdyn.audit.untrusted)" if "bytes, more than" in str(e) else ""
        raise Refused(f"{e}{bound}: not a JSON manifest") from None
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
    (the workflow folder the reviewer placed it in) and the registered plans and data the auditing
    cotdyn ships (``cotdyn.plan.config.bundled_roots``)."""
    folder = workflow_folder(study_dir)
    return [study_dir.resolve(), *([folder] if folder else []), *bundled_roots()]


def workflow_folder(study_dir: Path) -> Path | None:
    """The folder the study's ``results/`` lies in (where its run's relative paths were read), if any."""
    study = study_dir.resolve()
    return study.parents[1] if study.parent.name == "results" else None


def inside(path: Path, roots: list[Path]) -> bool:
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(root) for root in roots)


def outside_message(what: str, named, field: str) -> str:
    return (
        f"{what} {printable(str(named))} (field {field} of {STUDY_MANIFEST}) lies outside the study folder, "
        "the folder its results/ lies in and the bundled plans and data: not opened"
    )


def plan_candidates(study_dir, named) -> list[Path]:
    """The paths tried for the plan ``named`` (relative to the workflow's folder, as a config names
    it): as given, then relative to each folder above the study, without duplicates."""
    named = Path(named)
    if named.is_absolute():
        return [named]
    out = [named]
    for folder in Path(study_dir).resolve().parents:
        if folder / named not in out:
            out.append(folder / named)
    return out


def locate_plan(study_dir, named, sha256: str | None, roots: list[Path] | None = None) -> Path | None:
    """The first candidate file whose sha256 is the one the study ran under; failing that, the first
    found (the audit then reports its hash mismatch); failing that, None. ``roots``: only a file that
    resolves (links followed) inside one of these folders is taken."""
    found = [p for p in plan_candidates(study_dir, named) if p.is_file()]
    if roots is not None:
        found = [p for p in found if any(p.resolve().is_relative_to(root) for root in roots)]
    matching = [p for p in found if sha256 is not None and plan_sha256(p) == sha256]
    return (matching or found or [None])[0]


def admitted_plan(study_dir: Path, config: dict, manifest: dict, plan_path) -> Path:
    """The plan the reviewer named, or the config's plan if it lies inside the trusted roots."""
    if plan_path is not None:  # the reviewer's own choice
        if not Path(plan_path).is_file():
            raise Refused(f"plan {plan_path} (given with --plan) not found")
        return Path(plan_path)
    roots = trusted_roots(study_dir)
    found = locate_plan(study_dir, config["plan"], manifest.get("plan_sha256"), roots)
    if found is None:
        if locate_plan(study_dir, config["plan"], None) is not None:
            raise Refused(outside_message("plan", config["plan"], "config.plan") + "; name it with --plan")
        raise Refused(
            f"plan {printable(config['plan'])} not found (looked in the current folder and in every folder "
            f"above {study_dir}); name it with --plan"
        )
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
    folder = workflow_folder(study_dir)
    if not named.is_absolute() and folder is not None:  # relative to the workflow folder, as a run saw it
        named = folder / named
    if not inside(named, trusted_roots(study_dir)):
        return None, outside_message(
            "generation cache", config.get("cache"), "config.cache"
        ) + " (name it with --cache)"
    return named, ""


def admit(study_dir, plan_path=None, cache=None) -> Admitted:
    """The study's manifest, config, plan, cells and cache, each checked before anything else is read."""
    study_dir = Path(study_dir)
    if not study_dir.is_dir():
        raise Refused(f"{study_dir}: not a folder")
    entries = refuse_links(study_dir)
    manifest_path = study_dir / STUDY_MANIFEST
    manifest = read_manifest(manifest_path)
    missing = pinned_plugin_problems(manifest) + plugin_problems(manifest["config"])
    if missing:  # the re-derivation would run other code than the study ran, or none
        raise Refused("; ".join(missing))
    try:
        # the run's schema, with the backend registry filled in
        config = validate_config(without_toy_keys(options_moved(manifest["config"])), f"{manifest_path} (config)")
        study_signals(config.get("signals", ()))  # a manifest from before plugins were pinned
    except (ConfigError, PluginError) as e:
        raise Refused(printable(str(e))) from None
    path = admitted_plan(study_dir, config, manifest, plan_path)
    try:
        plan = load_plan(path)
    except (ValueError, OSError) as e:
        raise Refused(f"plan not read: {printable(str(e))}") from None
    try:
        cells = resolve_cells(config, plan, "manifest config")
        protocols = study_protocols(config, plan)
    except ConfigError as e:
        raise Refused(str(e)) from None
    cache_dir, note = admitted_cache(study_dir, config, cache)
    raw = raw_files(config, protocols, cells)
    return Admitted(manifest, config, path, plan, cells, protocols, raw, cache_dir, note, entries)
