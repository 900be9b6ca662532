"""What a registration attests, in words (docs/reference.md section 7, "The registration").

REGISTERED holds the plan's sha256 and the author's date, and may name a timestamp token beside it
(RFC 3161, ``cotdyn.plan.timestamp``). Where a token exists its time is the registration's, shown
everywhere; a typed date is only ever shown as the "author's date". Only a reviewer who supplies the
timestamp authority's CA certificate (``cotdyn audit --tsa-ca``) gets the token verified.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cotdyn.plan.load import plan_sha256
from cotdyn.plan.registered import TOKEN_NAME, PreregistrationError, read_registered, sibling_paths
from cotdyn.plan.timelock import THIS_REGISTRATION, declared_lock
from cotdyn.plan.timestamp import TimestampError, Token, parse_token, read_token_bytes, verify_token

NO_CA = "timestamp present, not verified: no trusted TSA certificate given"


@dataclass(frozen=True)
class Registration:
    plan_path: str
    plan_sha256: str  # the plan file's, as found
    registered_sha256: str  # what REGISTERED freezes
    author_date: str
    registry_url: str | None
    token_path: Path | None
    token_sha256: str | None  # what REGISTERED records
    token: Token | None  # parsed, not verified
    problems: tuple[str, ...]  # what does not hold together, each naming its file

    @property
    def attested_time(self) -> datetime.datetime | None:
        return self.token.gen_time if self.token is not None else None

    def when(self) -> str:
        """The registration's time in words: the token's where there is one, else the author's date."""
        if self.token is None:
            return f"registered {self.author_date} (author's date; no timestamp token)"
        stamp = self.token.gen_time.strftime("%Y-%m-%d %H:%M UTC")
        return f"registered {stamp} (timestamp token; author's date {self.author_date})"

    def line(self, attestation: str) -> str:
        """``plan <path> sha256 <hex>; registered <when>[, <attestation>][; public registration <url>]``
        (the URL is REGISTERED's, unchecked: this workplace reaches no registry)."""
        when = f"{self.when()}, {attestation}" if attestation else self.when()
        registry = f"; public registration {self.registry_url} (the author's word)" if self.registry_url else ""
        return f"plan {self.plan_path} sha256 {self.plan_sha256}; {when}{registry}"


def read_registration(plan_path, registered_path=None) -> Registration:
    """The plan's registration as REGISTERED and its token record it; PreregistrationError when
    REGISTERED cannot be read. What does not hold together is in ``problems``, not raised, so the
    audit names every one."""
    plan_path = Path(plan_path)
    registered_path = Path(registered_path) if registered_path else sibling_paths(plan_path)[0]
    record = read_registered(registered_path)
    found = plan_sha256(plan_path)
    problems = []
    if found != record["plan_sha256"]:
        problems.append(
            f"{registered_path} registers sha256 {record['plan_sha256']}, but {plan_path} has sha256 {found}: "
            "the plan was edited after registration"
        )
    token = token_path = None
    if "timestamp_token_sha256" in record:
        token_path = registered_path.with_name(TOKEN_NAME)
        try:
            data = read_token_bytes(token_path)
            token = parse_token(data, str(token_path))
        except TimestampError as e:
            problems.append(str(e))
        else:
            problems += _token_problems(token, record, registered_path, token_path)
    return Registration(
        str(plan_path), found, record["plan_sha256"], record["date"], record.get("registry_url"),
        token_path, record.get("timestamp_token_sha256"), token, tuple(problems),
    )  # fmt: skip


def _token_problems(token: Token, record: dict, registered_path: Path, token_path: Path) -> list[str]:
    problems = []
    if token.sha256 != record["timestamp_token_sha256"]:
        problems.append(
            f"{token_path} has sha256 {token.sha256}, but {registered_path} records "
            f"{record['timestamp_token_sha256']}: the token was replaced"
        )
    if token.imprint_sha256 != record["plan_sha256"]:
        problems.append(
            f"{token_path} is over sha256 {token.imprint_sha256}, but {registered_path} registers "
            f"{record['plan_sha256']}: the token attests another plan"
        )
    signed = record.get("timestamp_signed_sha256")
    if signed is not None and token.signed_sha256 != signed:
        problems.append(
            f"{token_path} carries a signed TSTInfo of sha256 {token.signed_sha256}, but {registered_path} "
            f"records {signed}: the token was replaced"
        )
    attested = token.gen_time.date().isoformat()
    if record["date"] < attested:
        problems.append(
            f"{registered_path} gives the date {record['date']}, earlier than its timestamp token's "
            f"({token.gen_time:%Y-%m-%d %H:%M} UTC): a registration cannot predate its attestation"
        )
    return problems


def verified_attestation(registration: Registration, tsa_ca) -> tuple[str, list[str]]:
    """The attestation part of the registration line, and its problems: the token's signature
    checked against the CA the reviewer gives (``tsa_ca``), or said to be unchecked."""
    if registration.token is None:  # when() already says there is none
        return ("timestamp token recorded but unreadable" if registration.token_path else ""), []
    if tsa_ca is None:
        return NO_CA, []
    try:
        verify_token(read_token_bytes(registration.token_path), registration.registered_sha256, tsa_ca)
    except TimestampError as e:
        return "timestamp NOT verified", [str(e)]
    return f"attested by {registration.token.tsa_subject or 'the TSA'} (verified against {tsa_ca})", []


def registration_line(plan_path, registered_path=None, tsa_ca=None) -> str:
    """``plan <path> sha256 <hex>; registered <when>, <attestation>``: the line a register, a run
    and an audit print first."""
    try:
        registration = read_registration(plan_path, registered_path)
    except PreregistrationError as e:
        return f"plan {plan_path} sha256 {plan_sha256(plan_path)}; not registered ({e})"
    return registration.line(verified_attestation(registration, tsa_ca)[0])


# What a later version locked to an earlier registration may change: the analysis. Everything
# else (the protocol, the panel's models and data, the sampling, the lock) is the generation's, so
# it must equal the earlier plan's key for key; a key this list does not name counts as generation.
ANALYSIS_KEYS = frozenset(
    {"plan_version", "title", "time_lock", "exclusion", "hypotheses", "verdict_rule", "holm", "analysis",
     "changes_from_previous_version"}
)  # fmt: skip


def generation_changes(earlier: dict, later: dict) -> list[str]:
    """The top-level keys outside ``ANALYSIS_KEYS`` whose values differ between two plans."""
    keys = [k for k in dict.fromkeys([*earlier, *later]) if k not in ANALYSIS_KEYS and not str(k).startswith("_")]
    return [k for k in keys if earlier.get(k) != later.get(k)]


@dataclass(frozen=True)
class EarlierRegistration:
    """The registration a later version's generation is locked to, read from its own files: the
    earlier plan, its REGISTERED and its token, beside the REGISTERED the lock names."""

    registered_path: Path
    registration: Registration | None  # None where its files could not be read
    problems: tuple[str, ...]

    def date(self) -> str:
        if self.registration is None:
            return "an unreadable registration"
        if self.registration.token is None:
            return f"{self.registration.author_date} (author's date; no timestamp token)"
        return f"{self.registration.token.gen_time:%Y-%m-%d %H:%M} UTC (timestamp token)"


def earlier_registration(plan: dict, plan_path) -> EarlierRegistration | None:
    """For a plan whose generation is locked to an earlier registration (a later version that
    changes only the analysis): that registration verified from its files, none taken on this
    plan's word; None for a plan locked to its own registration or to none."""
    from cotdyn.plan.load import load_plan

    locked = declared_lock(plan, plan_path, None)
    if locked is None or plan.get("time_lock") == THIS_REGISTRATION:
        return None
    where = Path(plan_path).parent / (locked.registered or "REGISTERED")
    if locked.registered is None:
        return EarlierRegistration(
            where, None, (f"{plan_path}: time_lock names no 'registered' file to check the earlier registration by",)
        )
    earlier_plan = where.with_name("plan.yaml")
    if not earlier_plan.is_file():
        return EarlierRegistration(where, None, (
            f"{earlier_plan}: not found; a version locked to an earlier registration is verified from that "
            "registration's plan, REGISTERED and token, which travel with it",
        ))  # fmt: skip
    try:
        registration = read_registration(earlier_plan, where)
        earlier = load_plan(earlier_plan)
    except (PreregistrationError, ValueError, OSError) as e:
        return EarlierRegistration(where, None, (str(e),))
    problems = list(registration.problems)
    if earlier.get("time_lock") != THIS_REGISTRATION:
        problems.append(
            f"{earlier_plan}: its time_lock is not {THIS_REGISTRATION}: it is no registration generation was locked to"
        )
    named = {"plan_sha256": registration.registered_sha256, "token_sha256": registration.token_sha256,
             "signed_sha256": _recorded_signed(where, earlier)}  # fmt: skip
    for key, value in named.items():
        if getattr(locked, key) != value:
            problems.append(f"{plan_path}: time_lock.{key} is {getattr(locked, key)}, but {where} records {value}")
    for key in generation_changes(earlier, plan):
        problems.append(
            f"{plan_path}: '{key}' differs from the earlier registration's ({earlier_plan}): a later version "
            "locked to it may change only the analysis"
        )
    return EarlierRegistration(where, registration, tuple(problems))


def _recorded_signed(registered_path: Path, earlier_plan: dict) -> str | None:
    """The signed TSTInfo's sha256 the earlier lock holds: its REGISTERED's, under plan v5 on."""
    from cotdyn.plan.timelock import SIGNED_LOCK_VERSION, plan_version

    if plan_version(earlier_plan) < SIGNED_LOCK_VERSION:
        return None
    return read_registered(registered_path).get("timestamp_signed_sha256")


def earlier_registration_problems(plan: dict, plan_path) -> tuple[str | None, list[str]]:
    """The earlier registration a later version is locked to, in words, and what does not hold
    (``earlier_registration``); (None, []) for a plan locked to its own registration or to none."""
    earlier = earlier_registration(plan, plan_path)
    if earlier is None:
        return None, []
    return f"generation locked to the registration of {earlier.date()} ({earlier.registered_path})", list(
        earlier.problems
    )
