"""Generation time-locked to its registration (plan v4; docs/design.md section 7, "The registration").

A registration is the plan's sha256 and, where one is stored beside REGISTERED, the sha256 of an
RFC 3161 timestamp token over that plan (``cotdyn.plan.timestamp``). Under plan v4 its *lock*
enters every request seed's key (``cotdyn.protocol.seeds.request_seed``), as preRNG seeds
randomization with the hash of the preregistration (Mazor, Mazor & Mukamel 2018):

- a plan changed after generation changes every seed, so every sample, and regeneration exposes it;
- with a token, the seeds hash the authority's signature over a time, which no one can hold before
  that time: no sample can have been drawn before the attested registration.

``time_lock: this_registration`` locks to the plan's own registration; a later version that changes
only the analysis names the registration its generation is locked to, by its hashes
(``{plan_sha256: ..., token_sha256: ... or null, registered: <its REGISTERED, beside this plan>}``).
Plans before v4 name no lock: their seeds hash what they always did.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

THIS_REGISTRATION = "this_registration"
# The derived protocol field that carries the lock to every request (never set by a config).
LOCK_FIELD = "time_lock"
# Where load_plan keeps the lock it derived from the plan's file and its REGISTERED (not a YAML key).
PLAN_LOCK_KEY = "_generation_lock"
_HEX64 = frozenset("0123456789abcdef")


class TimeLockError(ValueError):
    pass


@dataclass(frozen=True)
class LockedTo:
    """The registration a plan's generation is locked to."""

    plan_sha256: str
    token_sha256: str | None
    registered: str | None = None  # where that registration's REGISTERED lies (a later version's)

    @property
    def lock(self) -> str:
        """The text every request seed's key holds."""
        token = f"+tsr:{self.token_sha256}" if self.token_sha256 else ""
        return f"plan:{self.plan_sha256}{token}"

    def describe(self) -> str:
        attested = f", timestamp token sha256 {self.token_sha256[:12]}" if self.token_sha256 else ", no timestamp token"
        return f"plan sha256 {self.plan_sha256[:12]}{attested}"


def _hex64(value, where: str) -> str:
    text = str(value)
    if len(text) != 64 or not set(text) <= _HEX64:
        raise TimeLockError(f"{where}: expected the 64 hex digits of a sha256")
    return text


def declared_lock(plan: dict, plan_path: str | Path, token_sha256: str | None) -> LockedTo | None:
    """The registration the plan's generation is locked to: None for a plan that names no
    ``time_lock`` (v1-v3); its own (its file's sha256, the token REGISTERED records) for
    ``this_registration``; the one it names otherwise."""
    declared = plan.get(LOCK_FIELD)
    if declared is None:
        return None
    where = f"{plan_path}: time_lock"
    if declared == THIS_REGISTRATION:
        sha = hashlib.sha256(Path(plan_path).read_bytes()).hexdigest()
        return LockedTo(sha, token_sha256)
    if not isinstance(declared, dict) or set(declared) - {"plan_sha256", "token_sha256", "registered"}:
        raise TimeLockError(
            f"{where}: expected '{THIS_REGISTRATION}' or a mapping of plan_sha256, token_sha256, registered"
        )
    token = declared.get("token_sha256")
    registered = declared.get("registered")
    if registered is not None and (Path(str(registered)).is_absolute() or ".." in Path(str(registered)).parts):
        raise TimeLockError(f"{where}.registered: a path inside the plan's folder, without '..'")
    return LockedTo(
        _hex64(declared.get("plan_sha256"), f"{where}.plan_sha256"),
        None if token is None else _hex64(token, f"{where}.token_sha256"),
        str(declared["registered"]) if declared.get("registered") is not None else None,
    )


def protocol_lock(plan: dict) -> dict:
    """The lock as a protocol field, for the plans that name one (read by the request builders)."""
    lock = plan.get(PLAN_LOCK_KEY)
    return {LOCK_FIELD: lock} if lock is not None else {}
