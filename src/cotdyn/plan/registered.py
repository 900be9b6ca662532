"""REGISTERED, the registration's record (docs/reference.md section 7): the plan's sha256, the author's
date and, where one was stored beside it, the sha256 of a timestamp token over the plan
(``REGISTERED.tsr``) and the public registration's address. Read strictly: a regular file, bounded,
no key twice, no alias."""

from __future__ import annotations

from pathlib import Path

import yaml

from cotdyn.files.strict import MissingFile, UntrustedFileError, read_yaml

MAX_REGISTERED_BYTES = 64 << 10  # a hash, a date, a token hash and a URL: a few hundred bytes


class PreregistrationError(ValueError):
    pass


def sibling_paths(plan_path: str | Path) -> tuple[Path, Path]:
    """REGISTERED and deviations.yaml live beside the plan they belong to."""
    plan_path = Path(plan_path)
    return plan_path.with_name("REGISTERED"), plan_path.with_name("deviations.yaml")


def registration_date(date) -> str:
    """An ISO date (YYYY-MM-DD), or a named error: the date is written into REGISTERED and shown on pages."""
    import datetime

    text = str(date)
    try:
        if len(text) == 10 and datetime.date.fromisoformat(text).isoformat() == text:
            return text
    except ValueError:
        pass
    raise PreregistrationError(f"--date {text!r}: expected an ISO date, YYYY-MM-DD")


# The timestamp token's file, beside REGISTERED (what `openssl ts -reply` and a TSA's HTTP answer hold).
TOKEN_NAME = "REGISTERED.tsr"
# The power table computed at registration (plan v5 on: cotdyn.analysis.power.registered_table), beside REGISTERED.
POWER_NAME = "power.json"
REGISTERED_FIELDS = (
    "plan_sha256", "date", "timestamp_token", "timestamp_token_sha256", "timestamp_signed_sha256", "registry_url",
    "power_table", "power_table_sha256", "underpowered",
)  # fmt: skip


def registered_text(
    sha256: str,
    date: str,
    token_sha256: str | None = None,
    registry_url: str | None = None,
    signed_sha256=None,
    power_sha256: str | None = None,
    underpowered: str | None = None,
) -> str:
    """REGISTERED's text, written by the YAML dumper (a value cannot add keys); the date stays a
    quoted string, as in the registered plans' files. ``date`` is the author's; a token's time is
    read from the token itself, never copied here. ``signed_sha256``: the token's signed TSTInfo's
    (``cotdyn.plan.timestamp.Token.signed_sha256``), the lock of plan v5 on. ``power_sha256``: the
    power table's (POWER_NAME); ``underpowered``: the author's registration of a plan below its
    min_power, the hypotheses in words."""
    fields = {"plan_sha256": sha256, "date": registration_date(date)}
    if token_sha256 is not None:
        fields |= {"timestamp_token": TOKEN_NAME, "timestamp_token_sha256": token_sha256}
        if signed_sha256 is not None:
            fields["timestamp_signed_sha256"] = signed_sha256
    if registry_url is not None:
        fields["registry_url"] = str(registry_url)
    if power_sha256 is not None:
        fields |= {"power_table": POWER_NAME, "power_table_sha256": power_sha256}
    if underpowered is not None:
        fields["underpowered"] = str(underpowered)
    body = yaml.safe_dump(fields, sort_keys=False, allow_unicode=False)
    return "# The registration of plan.yaml: its sha256 and date (cotdyn.plan.registration.register).\n" + body


def read_registered(registered_path: str | Path) -> dict:
    path = Path(registered_path)
    try:  # strictly: a regular file, a few hundred bytes, no key twice, no alias
        data = read_yaml(path, max_bytes=MAX_REGISTERED_BYTES, max_aliases=0)
    except MissingFile:
        raise PreregistrationError(f"{path} not found: the plan has not been registered") from None
    except UntrustedFileError as e:
        raise PreregistrationError(str(e)) from None
    for key in ("plan_sha256", "date"):
        if not isinstance(data, dict) or key not in data:
            raise PreregistrationError(f"{path}: missing field '{key}'")
    unknown = sorted(set(data) - set(REGISTERED_FIELDS))
    if unknown:
        raise PreregistrationError(f"{path}: unknown field(s) {', '.join(map(str, unknown))}")
    if ("timestamp_token" in data) != ("timestamp_token_sha256" in data):
        raise PreregistrationError(f"{path}: timestamp_token and timestamp_token_sha256 come together")
    if "timestamp_signed_sha256" in data and "timestamp_token" not in data:
        raise PreregistrationError(f"{path}: timestamp_signed_sha256 without a timestamp_token")
    if data.get("timestamp_token", TOKEN_NAME) != TOKEN_NAME:
        raise PreregistrationError(f"{path}: timestamp_token must be {TOKEN_NAME}, the file beside it")
    if ("power_table" in data) != ("power_table_sha256" in data):
        raise PreregistrationError(f"{path}: power_table and power_table_sha256 come together")
    if data.get("power_table", POWER_NAME) != POWER_NAME:
        raise PreregistrationError(f"{path}: power_table must be {POWER_NAME}, the file beside it")
    return {k: str(data[k]) for k in REGISTERED_FIELDS if data.get(k) is not None}


def registered_token(plan_path: str | Path) -> dict:
    """The sha256s of the timestamp token the plan's REGISTERED records (``token_sha256``, of its file;
    ``signed_sha256``, of what its authority signed); empty without a token or before registration
    (the lock of a plan not yet registered is its sha256 alone)."""
    registered = sibling_paths(plan_path)[0]
    if not registered.exists():
        return {}
    record = read_registered(registered)
    return {
        "token_sha256": record.get("timestamp_token_sha256"),
        "signed_sha256": record.get("timestamp_signed_sha256"),
    }
