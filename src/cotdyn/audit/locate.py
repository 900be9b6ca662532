"""Where a study's plan is, for an audit run from any folder (``cotdyn audit DIR``).

A study's config names its plan relative to the workflow's folder (``plan: preregistration/plan.yaml``),
and ``results/<study>`` usually lies two levels below that folder. The audit looks for the named path
as given (absolute, or relative to the current folder), then relative to each folder above the study,
and takes the first file whose sha256 is the one the study ran under; failing that, the first file
found (the audit then reports its hash mismatch); failing that, none (the audit says where it looked).
The audit takes only a file inside the folders it trusts (``cotdyn.audit.untrusted.trusted_roots``).
"""

from __future__ import annotations

from pathlib import Path

from cotdyn.plan.load import plan_sha256


def plan_candidates(study_dir, named) -> list[Path]:
    """The paths the audit tries for the plan ``named``, in order, without duplicates."""
    named = Path(named)
    if named.is_absolute():
        return [named]
    out = [named]
    for folder in Path(study_dir).resolve().parents:
        candidate = folder / named
        if candidate not in out:
            out.append(candidate)
    return out


def locate_plan(study_dir, named, sha256: str | None, roots: list[Path] | None = None) -> Path | None:
    """The plan file ``named`` as the study saw it (see the module docstring), or None. ``roots``:
    only a file that resolves (links followed) inside one of these folders is taken."""
    found = [p for p in plan_candidates(study_dir, named) if p.is_file()]
    if roots is not None:
        found = [p for p in found if any(p.resolve().is_relative_to(root) for root in roots)]
    matching = [p for p in found if sha256 is not None and plan_sha256(p) == sha256]
    return (matching or found or [None])[0]


def not_found_message(study_dir, named) -> str:
    return (
        f"plan {named} not found (looked in the current folder and in every folder above {study_dir}); "
        "name it with --plan"
    )
