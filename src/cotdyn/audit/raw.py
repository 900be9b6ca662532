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


def raw_checks(study_dir, config: dict, protocols: dict[str, dict], cells) -> dict[str, tuple[bool, str]]:
    """Per raw file present: (whether it matches its seal and the cache, what was checked or found)."""
    study_dir = Path(study_dir)
    cache_dir = config.get("cache", "results/cache")
    checks, opened = {}, {}
    for path, (cell, variant, chains) in sorted(raw_files(config, protocols, cells).items()):
        if not (study_dir / path).exists() or (chains and not (study_dir / chains).exists()):
            continue
        try:
            table = pd.read_parquet(study_dir / path)
            if chains is None:
                requests = chains_requests(table, protocols[variant], cell)
            else:
                requests = samples_requests(table, pd.read_parquet(study_dir / chains), protocols[variant], cell)
        except (OSError, ValueError, KeyError, TypeError) as e:
            checks[path] = (False, f"unreadable as a raw table: {type(e).__name__}: {e}")
            continue
        problems, compared = check_against_cache(study_dir / path, requests, cache_dir, opened)
        if problems:
            checks[path] = (False, "; ".join(problems))
        elif compared:
            checks[path] = (True, "sealed, and every row equal to the generation cache")
        else:
            checks[path] = (True, f"sealed; generation cache {cache_dir} absent, rows not compared with it")
    return checks


def apply_raw_checks(files: list[FileCheck], checks: dict[str, tuple[bool, str]]) -> list[FileCheck]:
    """The manifest comparison with each raw file's seal and cache check laid over it: a raw file
    whose hash matches the manifest but not what generation wrote fails."""
    out = []
    for f in files:
        ok, detail = checks.get(f.path, (True, ""))
        if f.status == MATCH and f.path in checks:
            f = FileCheck(f.path, MATCH if ok else MISMATCH, detail)
        out.append(f)
    return out
