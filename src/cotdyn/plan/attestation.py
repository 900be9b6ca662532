"""What a registration attests, in words (docs/design.md section 7, "The registration").

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


def earlier_registration_problems(plan: dict, plan_path) -> tuple[str | None, list[str]]:
    """For a plan whose generation is locked to an earlier registration (a later version that
    changes only the analysis): that registration in words, and what does not match it. (None, [])
    for a plan locked to its own registration or to none."""
    locked = declared_lock(plan, plan_path, None)
    if locked is None or plan.get("time_lock") == THIS_REGISTRATION:
        return None, []
    where = Path(plan_path).parent / (locked.registered or "REGISTERED")
    words = (
        f"generation time-locked to an earlier registration ({where}: {locked.describe()}); "
        "this plan version was registered after generation began"
    )
    if locked.registered is None:
        return words, [f"{plan_path}: time_lock names no 'registered' file to check the earlier registration by"]
    try:
        record = read_registered(where)
    except PreregistrationError as e:
        return words, [str(e)]
    problems = []
    if record["plan_sha256"] != locked.plan_sha256:
        problems.append(
            f"{where} registers sha256 {record['plan_sha256']}, {plan_path}'s time_lock names {locked.plan_sha256}"
        )
    if record.get("timestamp_token_sha256") != locked.token_sha256:
        problems.append(
            f"{where} records token sha256 {record.get('timestamp_token_sha256')}, {plan_path}'s time_lock names {locked.token_sha256}"
        )
    return words, problems
