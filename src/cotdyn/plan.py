"""The registered plan (preregistration/plan.yaml): loading, hashing and the effective protocol."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml


def plan_sha256(path: str | Path) -> str:
    """sha256 of the plan file's bytes: the hash REGISTERED freezes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_plan(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        plan = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"plan file not found: {path}") from None
    for key in ("protocol", "exclusion", "hypotheses", "holm", "analysis"):
        if key not in plan:
            raise ValueError(f"{path}: missing top-level key '{key}'")
    return plan


def effective_protocol(plan: dict, *overrides: dict | None) -> dict[str, Any]:
    """The plan's frozen protocol with each override mapping applied in turn.

    An override may only name parameters the plan registers, so a typo cannot silently
    introduce a parameter the pipeline ignores.
    """
    protocol = dict(plan["protocol"])
    for override in overrides:
        for key, value in (override or {}).items():
            if key not in protocol:
                raise KeyError(f"unknown protocol parameter '{key}' (registered: {sorted(protocol)})")
            protocol[key] = value
    return protocol
