"""What the audit checks beside its re-derivation (docs/design.md section 7): every samples file's
seeds and every raw file against its seal and the generation cache (cotdyn.audit.raw), and the
grading page (cotdyn.audit.derive_outputs).

The two parts that need neither pandas nor the analysis libraries, reading the cache folders and
math-verify's verdicts on the grading page's pairs, are asked of the audit's second process first
(``ask``; cotdyn.audit.parallel), so that it works on them while this process re-derives the study;
``side_checks`` then does the rest with its answers. With one process each is computed where it is
needed, and the report is the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cotdyn.audit.cache_rows import folder_rows
from cotdyn.audit.derive_outputs import derive_grading, grading_pairs
from cotdyn.audit.parallel import Side, SideFailed
from cotdyn.audit.raw import cache_folders, raw_checks
from cotdyn.audit.view import StudyView
from cotdyn.files.terminal import printable
from cotdyn.grading.symbolic import math_verify_verdicts
from cotdyn.plan.config import ConfigError
from cotdyn.plan.registration import PreregistrationError

DERIVATION_ERRORS = (ConfigError, PreregistrationError, ValueError, KeyError, TypeError, OSError)


@dataclass(frozen=True)
class Asked:
    """What the second process was asked: each cache folder's job, and why the grading page's pairs
    could not be gathered (None when they were)."""

    folders: dict[Path, str]
    grading_problem: str | None


@dataclass(frozen=True)
class SideResult:
    seeds_checked: int
    seed_problems: list
    raw_checks: dict
    grading_problem: str | None


def failed(e: Exception) -> str:
    return f"re-derivation failed: {type(e).__name__}: {printable(str(e))[:500]}"


def ask(side: Side, view: StudyView, config: dict, cells: dict, protocols: dict, raw: dict, cache_dir) -> Asked:
    """Ask ``side`` for every cache folder the seals name (``raw.cache_folders``) and for math-verify's
    verdicts on the grading page's pairs (``derive_outputs.grading_pairs``)."""
    folders = {}
    for i, (folder, keys) in enumerate(cache_folders(view, raw, cache_dir, models_of(cells)).items()):
        folders[folder] = f"cache-{i}"
        side.ask(folders[folder], folder_rows, folder, keys)
    try:
        side.ask("verdicts", math_verify_verdicts, grading_pairs(view, config, cells, protocols))
    except DERIVATION_ERRORS as e:
        return Asked(folders, failed(e))
    finally:
        side.asked_all()
    return Asked(folders, None)


def models_of(cells: dict) -> dict[str, str]:
    return {name: spec.model_key for name, spec in cells.items()}


def side_checks(side: Side, asked: Asked, view: StudyView, scratch: Path, config: dict, cells: dict,
                protocols: dict, raw: dict, cache_dir, cache_note: str, honoured: dict) -> SideResult:  # fmt: skip
    """The grading page, with the verdicts ``side`` judged, and the seed, seal and cache checks, with
    the cache folders it read."""
    problem = asked.grading_problem
    if problem is None:
        try:
            derive_grading(view, scratch, config, cells, protocols, side.answer("verdicts"))
        except SideFailed as e:
            problem = f"grading page not re-derived: {e}"
        except DERIVATION_ERRORS as e:
            problem = failed(e)

    def cached(folder: Path, keys: set[str]) -> dict:
        name = asked.folders.get(folder)
        return side.answer(name) if name else folder_rows(folder, keys)

    seeds: dict[str, tuple[int, str | None]] = {}  # checked with the raw files: their requests read once
    checks = raw_checks(view, raw, protocols, cache_dir, cache_note, models_of(cells), seeds, honoured, cached)
    problems = [seeds[path][1] for path in sorted(seeds) if seeds[path][1]]  # in the raw files' path order
    return SideResult(sum(rows for rows, _ in seeds.values()), problems, checks, problem)
