"""The audit of the raw data (docs/design.md section 7): chains and samples against their seals and the cache.

The study manifest's hash of a samples file shows only that the file has not changed since the
manifest was written; a rerun over a forged file, or a forger who re-hashes, would pass it. So the
audit reads the requests back from each raw file (``cotdyn.generation.sealing``), checks them
against the seal generation wrote, and compares every row's text, token ids and finish reason with
the completion the generation cache holds under its key. Without the cache (a study folder sent
alone) only the seal is checked, and the report says so.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cotdyn.files.layout import reference_file, variant_file
from cotdyn.files.terminal import printable
from cotdyn.generation.sealing import chains_requests, check_against_cache, samples_requests
from cotdyn.plan.config import reference_id, samples_variant
from cotdyn.provenance.integrity import MATCH, MISMATCH, FileCheck


def raw_files(config: dict, protocols: dict[str, dict], cells) -> dict[str, tuple[str, str, str | None]]:
    """Each raw file of the study (relative path) -> (cell, its generating variant, the chains file
    a samples file continues, None for a chains file)."""
    raw = {}
    for name in cells:
        for variant, protocol in protocols.items():
            chains = reference_file(name, reference_id(protocol), "chains.parquet")
            raw.setdefault(chains, (name, variant, None))
            if samples_variant(config, variant) == variant:
                raw[variant_file(name, variant, "samples.parquet")] = (name, variant, chains)
    return raw


def raw_check(study_dir: Path, path: str, cell: str, protocol: dict, chains: str | None, cache_dir, opened: dict):
    """(whether one raw file matches its seal and the cache, what was checked or found); None when
    the cache was not there to compare with and nothing failed."""
    try:
        table = pd.read_parquet(study_dir / path)
        if chains is None:
            requests = chains_requests(table, protocol, cell)
        else:
            requests = samples_requests(table, pd.read_parquet(study_dir / chains), protocol, cell)
        problems, compared = check_against_cache(study_dir / path, requests, cache_dir, opened)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return False, f"unreadable as a raw table: {type(e).__name__}: {printable(str(e))[:300]}"
    if problems:
        return False, "; ".join(problems)
    return (True, "sealed, and every row equal to the generation cache") if compared else None


class OneFolder(dict):
    """The cache folders ``check_against_cache`` opened, holding one at a time: a folder (one model's
    completions, loaded whole) is let go when the next is opened, so the audit's memory does not grow
    with the number of models."""

    def __setitem__(self, folder, cache) -> None:
        self.clear()
        super().__setitem__(folder, cache)


def by_model(raw: dict, models: dict[str, str] | None) -> list:
    """The raw files in the order their cache folders are read: by the model of their cell
    (``models``: cell -> model key), then by path; by path alone without ``models``."""
    return sorted(raw.items(), key=lambda item: ((models or {}).get(item[1][0], ""), item[0]))


def raw_checks(study_dir, raw: dict, protocols: dict[str, dict], cache_dir, cache_note: str,
               refused: dict[str, str], sealed: dict[str, str | None],
               models: dict[str, str] | None = None) -> dict[str, tuple[bool, str]]:  # fmt: skip
    """Per raw file present: (whether it matches its seal and the cache, what was checked or found).
    ``refused``: the files the bounds kept from being parsed, and why (cotdyn.audit.bounds);
    ``sealed``: each other file's seal problem, found before anything was parsed; ``cache_note``:
    why the config's cache was not opened; ``models``: each cell's model, so each model's cache
    folder is read once and let go before the next (``OneFolder``)."""
    study_dir = Path(study_dir)
    checks, opened = {}, OneFolder()
    for path, (cell, variant, chains) in by_model(raw, models):
        if path in refused or (chains in refused):
            checks[path] = (False, f"not parsed: {refused.get(path) or chains + ' refused'}")
            continue
        if not (study_dir / path).exists() or (chains and not (study_dir / chains).exists()):
            continue
        if sealed.get(path):
            checks[path] = (False, sealed[path])
            continue
        checks[path] = raw_check(study_dir, path, cell, protocols[variant], chains, cache_dir, opened) or (
            True,
            f"sealed; {cache_note or f'generation cache {cache_dir} absent'}, rows not compared with it",
        )
    return checks


def apply_raw_checks(files: list[FileCheck], checks: dict[str, tuple[bool, str]]) -> list[FileCheck]:
    """The manifest comparison with each raw file's seal and cache check laid over it: a raw file
    whose hash matches the manifest but not what generation wrote fails."""
    out = []
    for f in files:
        ok, detail = checks.get(f.path, (True, ""))
        if f.status == MATCH and f.path in checks:
            f = FileCheck(f.path, MATCH if ok else MISMATCH, detail)
        elif not ok:  # already failing its manifest hash: say what the raw check found too
            f = FileCheck(f.path, f.status, f"{f.detail}; {detail}")
        out.append(f)
    return out
