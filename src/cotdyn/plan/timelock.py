"""Generation time-locked to its registration (plan v4; docs/reference.md section 7, "The registration").

A registration is the plan's sha256 and, where one is stored beside REGISTERED, the sha256 of an
RFC 3161 timestamp token over that plan (``cotdyn.plan.timestamp``). Under plan v4 its *lock*
enters every request seed's key (``cotdyn.protocol.seeds.request_seed``), as preRNG seeds
randomization with the hash of the preregistration (Mazor, Mazor & Mukamel 2018):

- a plan changed after generation changes every seed, so every sample, and regeneration exposes it;
- with a token, the seeds hash the authority's signature over a time, which no one can hold before
  that time: no sample can have been drawn before the attested registration.

``time_lock: this_registration`` locks to the plan's own registration; a later version that changes
only the analysis names the registration its generation is locked to, by its hashes
(``{plan_sha256: ..., token_sha256: ... or null, signed_sha256: ... (v5 on), registered: <its
REGISTERED, beside this plan>}``), and the audit verifies that registration from its own files
(``cotdyn.plan.attestation.earlier_registration``). From plan v4 on the lock is required; plans
before v4 name none, and their seeds hash what they always did.

What of the token enters the lock is registered by the plan version: under v4 the sha256 of the
token file (``+tsr:``), under v5 on the sha256 of the TSTInfo the authority signed (``+tst:``), so
that a reply whose unsigned parts differ (a status text, the certificates sent) is the same lock:
one signature, one set of seeds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

THIS_REGISTRATION = "this_registration"
FIRST_LOCKED_VERSION = 4  # plan versions from this one on must name a time_lock
SIGNED_LOCK_VERSION = 5  # from this one on the lock holds the signed TSTInfo's sha256, not the file's
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
    signed_sha256: str | None = None  # the signed TSTInfo's (plan v5 on; None under v4)

    @property
    def lock(self) -> str:
        """The text every request seed's key holds."""
        if self.signed_sha256:
            return f"plan:{self.plan_sha256}+tst:{self.signed_sha256}"
        token = f"+tsr:{self.token_sha256}" if self.token_sha256 else ""
        return f"plan:{self.plan_sha256}{token}"


def _hex64(value, where: str) -> str:
    text = str(value)
    if len(text) != 64 or not set(text) <= _HEX64:
        raise TimeLockError(f"{where}: expected the 64 hex digits of a sha256")
    return text


def plan_version(plan: dict) -> int:
    version = plan.get("plan_version", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def _optional_hex64(declared: dict, key: str, where: str) -> str | None:
    return None if declared.get(key) is None else _hex64(declared[key], f"{where}.{key}")


def declared_lock(plan: dict, plan_path: str | Path, token: dict | None) -> LockedTo | None:
    """The registration the plan's generation is locked to: None for a plan before v4, which names
    no ``time_lock``; its own for ``this_registration`` (its file's sha256, and of the token its
    REGISTERED records, ``token``: ``{"token_sha256", "signed_sha256"}``); the one it names
    otherwise. A v4+ plan without one is refused by name."""
    declared = plan.get(LOCK_FIELD)
    where = f"{plan_path}: time_lock"
    if declared is None:
        if plan_version(plan) >= FIRST_LOCKED_VERSION:
            raise TimeLockError(
                f"{where}: missing; plan version {plan_version(plan)} locks generation to a registration "
                f"(plan v{FIRST_LOCKED_VERSION} on): add 'time_lock: {THIS_REGISTRATION}'"
            )
        return None
    if declared == THIS_REGISTRATION:
        sha = hashlib.sha256(Path(plan_path).read_bytes()).hexdigest()
        token = token or {}
        signed = token.get("signed_sha256") if plan_version(plan) >= SIGNED_LOCK_VERSION else None
        if token.get("token_sha256") and plan_version(plan) >= SIGNED_LOCK_VERSION and not signed:
            raise TimeLockError(
                f"{where}: the registration records no timestamp_signed_sha256, which a plan "
                f"v{SIGNED_LOCK_VERSION} lock holds (register the plan again with this version of cotdyn)"
            )
        return LockedTo(sha, token.get("token_sha256"), None, signed)
    keys = {"plan_sha256", "token_sha256", "signed_sha256", "registered"}
    if not isinstance(declared, dict) or set(declared) - keys:
        raise TimeLockError(f"{where}: expected '{THIS_REGISTRATION}' or a mapping of {', '.join(sorted(keys))}")
    registered = declared.get("registered")
    if registered is not None and (Path(str(registered)).is_absolute() or ".." in Path(str(registered)).parts):
        raise TimeLockError(f"{where}.registered: a path inside the plan's folder, without '..'")
    return LockedTo(
        _hex64(declared.get("plan_sha256"), f"{where}.plan_sha256"),
        _optional_hex64(declared, "token_sha256", where),
        str(registered) if registered is not None else None,
        _optional_hex64(declared, "signed_sha256", where),
    )


def protocol_lock(plan: dict) -> dict:
    """The lock as a protocol field, for the plans that name one (read by the request builders)."""
    lock = plan.get(PLAN_LOCK_KEY)
    return {LOCK_FIELD: lock} if lock is not None else {}
