"""The registered plan (preregistration/plan.yaml): loading, hashing and the effective protocol."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from cotdyn.grading.types import AS_WRITTEN, REGISTERED_EXTRACTION
from cotdyn.plan import timelock
from cotdyn.plan.registered import registered_token

# Protocol parameters the plan does not name (it was registered before they were parameters): each
# defaults to the rule the registered protocol describes (docs/reference.md section 4), so a study that
# does not set it runs the registered rule, and a config may override it as any parameter.
# ``answer_form``: plans v1-v3 grade answers as written (0.50 and \frac{1}{2} are two classes).
UNNAMED_DEFAULTS = {"extraction": REGISTERED_EXTRACTION, "answer_form": AS_WRITTEN}


def plan_sha256(path: str | Path) -> str:
    """sha256 of the plan file's bytes: the hash REGISTERED freezes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_plan(path: str | Path) -> dict[str, Any]:
    """The plan at ``path``, read strictly (cotdyn.files.strict: a regular file, bounded, no key
    twice, no alias bomb), with its top-level keys and panel benchmarks checked."""
    from cotdyn.files.strict import MissingFile, read_yaml

    path = Path(path)
    try:
        plan = read_yaml(path)
    except MissingFile:
        raise FileNotFoundError(f"plan file not found: {path}") from None
    if not isinstance(plan, dict):
        raise ValueError(f"{path}: the plan must be a YAML mapping, got {type(plan).__name__}")
    for key in ("protocol", "exclusion", "hypotheses", "holm", "analysis"):
        if key not in plan:
            raise ValueError(f"{path}: missing top-level key '{key}'")
    check_panel_benchmarks(plan, path)
    return with_generation_lock(plan, path)


def with_generation_lock(plan: dict, path: Path) -> dict:
    """The plan with the lock its generation is held to (plan v4's ``time_lock``; cotdyn.plan.timelock),
    derived from the plan file and the timestamp token its REGISTERED records."""
    locked = timelock.declared_lock(plan, path, registered_token(path))  # a TimeLockError is a ValueError
    return {**plan, timelock.PLAN_LOCK_KEY: locked.lock} if locked is not None else plan


def check_panel_benchmarks(plan: dict, path) -> None:
    """A plan names each benchmark of its panel by a registered name (``kind``, else its key) and
    freezes its content sha256, which the loader and the audit check the data against."""
    from cotdyn.grading.registry import kinds

    for key, entry in ((plan.get("panel") or {}).get("benchmarks") or {}).items():
        where = f"{path}: panel.benchmarks.{key}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected a mapping with content_sha256")
        name = entry.get("kind", key)
        if name not in kinds():
            raise ValueError(f"{where}: '{name}' is not a registered benchmark (known: {', '.join(kinds())})")
        if not re.fullmatch(r"[0-9a-f]{64}", str(entry.get("content_sha256", ""))):
            raise ValueError(f"{where}: content_sha256 must be the 64 hex digits of the frozen content")


def registered_protocol(plan: dict) -> dict[str, Any]:
    """The plan's frozen protocol, with the parameters it does not name at their registered rule
    (``UNNAMED_DEFAULTS``)."""
    unnamed = {k: v for k, v in UNNAMED_DEFAULTS.items() if k not in plan["protocol"]}
    return {**plan["protocol"], **unnamed, **timelock.protocol_lock(plan)}


def effective_protocol(plan: dict, *overrides: dict | None) -> dict[str, Any]:
    """The plan's frozen protocol (``registered_protocol``) with each override mapping applied in turn.

    An override may only name parameters the plan registers (or ``UNNAMED_DEFAULTS``), so a typo
    cannot silently introduce a parameter the pipeline ignores.
    """
    protocol = registered_protocol(plan)
    for override in overrides:
        for key, value in (override or {}).items():
            if key == timelock.LOCK_FIELD:
                raise KeyError(f"protocol parameter '{key}' is the registration's lock, never set by a config")
            if key not in protocol:
                raise KeyError(f"unknown protocol parameter '{key}' (registered: {sorted(protocol)})")
            protocol[key] = value
    return protocol
