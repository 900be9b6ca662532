"""cotdyn from Python: open a finished study, audit it, and analyse records on a copy (issue 63).

Three calls, re-exported as ``cotdyn.open_study``, ``cotdyn.audit`` and ``cotdyn.analyze``::

    import cotdyn

    study = cotdyn.open_study("results/default")
    study.records()            # every cell's records, one row per chain (a DataFrame)
    study.verdicts()           # one row per registered hypothesis: verdict and why
    report = cotdyn.audit("results/default")
    report.ok, report.registration, report.problems

    what_if = cotdyn.analyze(study.records(), study.plan)   # marked exploratory; never written

A study folder is untrusted input: ``open_study`` admits it as the audit does (no links, a manifest
and config read strictly, the plan located and loaded), and reads each table and JSON with the same
bounds. Nothing here writes into a study.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cotdyn.audit.untrusted import Admitted, admit
from cotdyn.files.layout import analysis_file, variant_file
from cotdyn.files.strict import read_json, regular_file

MAX_HYPOTHESES_BYTES = 64 << 20
REGISTERED = "registered"


@dataclass(frozen=True)
class Study:
    """A finished study folder as its manifest describes it (``open_study``)."""

    path: Path
    admitted: Admitted

    @property
    def config(self) -> dict:
        """The study's config as it ran (the manifest's, schema defaults filled)."""
        return self.admitted.config

    @property
    def plan(self) -> dict:
        """The registered plan the study ran under, as cotdyn loads it."""
        return self.admitted.plan

    @property
    def plan_path(self) -> Path:
        return self.admitted.plan_path

    @property
    def provenance(self) -> dict:
        """The study manifest: config and plan hashes and the sha256 of every output file."""
        return self.admitted.manifest

    @property
    def cells(self) -> list[str]:
        return list(self.config["cells"])

    def registration(self, tsa_ca: str | Path | None = None) -> str:
        """The registration in words, the line the audit prints first (its token verified against
        ``tsa_ca`` where given; cotdyn.plan.attestation)."""
        from cotdyn.plan.attestation import registration_line

        return registration_line(self.plan_path, tsa_ca=tsa_ca)

    def records(self, variant: str = REGISTERED) -> pd.DataFrame:
        """Every cell's records of ``variant`` (docs/reference.md section 4), one row per chain, with a
        ``cell`` column; a cell whose records the study lacks is left out."""
        paths = [self.path / variant_file(cell, variant, "records.parquet") for cell in self.cells]
        # each a regular file inside the study (the admission refused links; checked again as read)
        frames = [pd.read_parquet(p) for p in paths if p.is_file() and regular_file(p, root=self.path)]
        if not frames:
            raise FileNotFoundError(f"{self.path}: no records for variant '{variant}'")
        return pd.concat(frames, ignore_index=True)

    def hypotheses(self, variant: str = REGISTERED) -> dict[str, Any]:
        """The registered analysis's result (hypotheses.json): every cell's estimates and CIs, Holm,
        and the verdicts."""
        path = self.path / analysis_file(variant, "hypotheses.json")
        return read_json(path, max_bytes=MAX_HYPOTHESES_BYTES, root=self.path)

    def verdicts(self, variant: str = REGISTERED) -> pd.DataFrame:
        """One row per registered hypothesis: its id, verdict and the reason the analysis gives."""
        return verdict_table(self.hypotheses(variant))


def verdict_table(result: dict) -> pd.DataFrame:
    """hypotheses.json's verdicts as a table (id, verdict, and every other field as a column)."""
    rows = [{"id": hid, **(v if isinstance(v, dict) else {"verdict": v})} for hid, v in result["verdicts"].items()]
    return pd.DataFrame(rows)


def open_study(path: str | Path, plan: str | Path | None = None) -> Study:
    """The finished study at ``path`` (``results/<study>``), admitted as the audit admits it;
    ``plan``: the plan file, where the one its config names is not found (cotdyn.audit.untrusted.locate_plan).
    A folder that cannot be read as a study raises ValueError naming why."""
    return Study(Path(path), admit(Path(path), plan, None))


def audit(
    path: str | Path,
    *,
    plan: str | Path | None = None,
    cache: str | Path | None = None,
    tsa_ca: str | Path | None = None,
    pages: bool = True,
):
    """The audit ``cotdyn audit PATH`` runs, as an AuditReport: ``.ok``, ``.registration``,
    ``.time_lock``, ``.problems``, ``.files`` and ``.text()``, the report the command prints."""
    from cotdyn.audit.check import audit as run_audit

    return run_audit(path, plan, cache=cache, pages=pages, tsa_ca=tsa_ca)


def analyze(records: pd.DataFrame, plan: dict | str | Path) -> dict:
    """The registered analysis over ``records`` under ``plan`` (a loaded plan or its file), for a
    what-if on a copy: its result is marked ``"exploratory": True`` and is never written into a
    study, so nothing it returns can stand for a registered result."""
    from cotdyn.analysis.hypotheses import analyze as registered_analysis
    from cotdyn.plan.load import load_plan, plan_sha256

    if isinstance(plan, dict):
        loaded, sha = plan, None
    else:
        loaded, sha = load_plan(plan), plan_sha256(plan)
    return {"exploratory": True, **registered_analysis(records.copy(), loaded, sha)}
