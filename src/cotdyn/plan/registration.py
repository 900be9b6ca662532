"""Preregistration as code (docs/design.md section 7): the registered hash, declared deviations, plan.md.

``preregistration/REGISTERED`` freezes the sha256 of ``plan.yaml`` and the registration date.
A confirmatory cell may run only if the plan still has that hash and every difference between
the cell's effective protocol and the plan's frozen protocol is declared in
``preregistration/deviations.yaml``. ``plan.md`` is rendered from ``plan.yaml`` so the two
cannot drift.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from cotdyn.files.writers import write_json
from cotdyn.plan.config import study_protocols
from cotdyn.plan.load import load_plan, plan_sha256, registered_protocol, yaml_error

# The variant whose protocol a confirmatory cell is held to; other variants are sensitivity
# analyses reported against it (docs/design.md section 6), so their differences are not deviations.
REGISTERED_VARIANT = "registered"
DEVIATION_FIELDS = ("cell", "parameter", "registered", "used", "reason")
ANY_CELL = "*"


class PreregistrationError(ValueError):
    pass


@dataclass(frozen=True)
class Deviation:
    cell: str  # a cell name, or "*" for every confirmatory cell
    parameter: str
    registered: Any
    used: Any
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def sibling_paths(plan_path: str | Path) -> tuple[Path, Path]:
    """REGISTERED and deviations.yaml live beside the plan they belong to."""
    plan_path = Path(plan_path)
    return plan_path.with_name("REGISTERED"), plan_path.with_name("deviations.yaml")


# --- REGISTERED ---------------------------------------------------------------------------


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
REGISTERED_FIELDS = ("plan_sha256", "date", "timestamp_token", "timestamp_token_sha256", "registry_url")


def registered_text(sha256: str, date: str, token_sha256: str | None = None, registry_url: str | None = None) -> str:
    """REGISTERED's text, written by the YAML dumper (a value cannot add keys); the date stays a
    quoted string, as in the registered plans' files. ``date`` is the author's; a token's time is
    read from the token itself, never copied here."""
    fields = {"plan_sha256": sha256, "date": registration_date(date)}
    if token_sha256 is not None:
        fields |= {"timestamp_token": TOKEN_NAME, "timestamp_token_sha256": token_sha256}
    if registry_url is not None:
        fields["registry_url"] = str(registry_url)
    body = yaml.safe_dump(fields, sort_keys=False, allow_unicode=False)
    return "# The registration of plan.yaml: its sha256 and date (cotdyn.plan.registration.register).\n" + body


def register(
    plan_path: str | Path,
    registered_path: str | Path,
    date: str | None = None,
    token: bytes | None = None,
    registry_url: str | None = None,
) -> str:
    """Freeze the plan: write its sha256 and the author's ``date`` to ``registered_path``, and a
    timestamp ``token`` over the plan (RFC 3161, cotdyn.plan.timestamp) beside it; return the hash.

    Without ``date`` the token's day is the author's date. Refuses to overwrite: a plan is
    registered once, and a new plan is a new registration. Refuses a token over another plan, and
    an author's date earlier than the token's (a registration cannot predate its attestation)."""
    from cotdyn.plan.timestamp import TimestampError, parse_token

    registered_path = Path(registered_path)
    token_path = registered_path.with_name(TOKEN_NAME)
    for existing in (registered_path, token_path):
        if existing.exists() or existing.is_symlink():
            raise PreregistrationError(f"{existing} exists: a registration is never overwritten")
    load_plan(plan_path)  # a plan that does not load (duplicate keys, bad YAML) is never registered
    sha = plan_sha256(plan_path)
    token_sha = None
    if token is not None:
        try:
            parsed = parse_token(token, "the timestamp token")
        except TimestampError as e:
            raise PreregistrationError(str(e)) from None
        if parsed.imprint_sha256 != sha:
            raise PreregistrationError(
                f"the timestamp token is over sha256 {parsed.imprint_sha256}, but {plan_path} has sha256 {sha}: "
                "it attests another plan"
            )
        attested = parsed.gen_time.date().isoformat()
        date = attested if date is None else registration_date(date)
        if date < attested:
            raise PreregistrationError(f"--date {date} is earlier than the timestamp token's time ({attested})")
        token_path.write_bytes(token)
        token_sha = parsed.sha256
    if date is None:
        raise PreregistrationError("--date YYYY-MM-DD is required without a timestamp token")
    registered_path.write_text(registered_text(sha, date, token_sha, registry_url))
    return sha


def read_registered(registered_path: str | Path) -> dict:
    path = Path(registered_path)
    if not path.exists():
        raise PreregistrationError(f"{path} not found: the plan has not been registered")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise PreregistrationError(f"{path}: not YAML ({yaml_error(e)})") from None
    for key in ("plan_sha256", "date"):
        if not isinstance(data, dict) or key not in data:
            raise PreregistrationError(f"{path}: missing field '{key}'")
    unknown = sorted(set(data) - set(REGISTERED_FIELDS))
    if unknown:
        raise PreregistrationError(f"{path}: unknown field(s) {', '.join(map(str, unknown))}")
    if ("timestamp_token" in data) != ("timestamp_token_sha256" in data):
        raise PreregistrationError(f"{path}: timestamp_token and timestamp_token_sha256 come together")
    if data.get("timestamp_token", TOKEN_NAME) != TOKEN_NAME:
        raise PreregistrationError(f"{path}: timestamp_token must be {TOKEN_NAME}, the file beside it")
    return {k: str(data[k]) for k in REGISTERED_FIELDS if data.get(k) is not None}


def registered_token_sha256(plan_path: str | Path) -> str | None:
    """The sha256 of the timestamp token the plan's REGISTERED records; None without a token or
    before registration (the lock of a plan not yet registered is its sha256 alone)."""
    registered = sibling_paths(plan_path)[0]
    if not registered.exists():
        return None
    return read_registered(registered).get("timestamp_token_sha256")


def check_registered(plan_path: str | Path, registered_path: str | Path) -> str:
    """The plan's sha256 if it equals the registered one; otherwise an error naming both."""
    registered = read_registered(registered_path)["plan_sha256"]
    found = plan_sha256(plan_path)
    if found != registered:
        raise PreregistrationError(
            f"{plan_path} has sha256 {found}, but {registered_path} registers {registered}: "
            "the plan was edited after registration"
        )
    return found


# --- deviations ---------------------------------------------------------------------------


def parse_deviations(entries: Any, source: str) -> list[Deviation]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise PreregistrationError(f"{source}: expected a list of deviations, got {type(entries).__name__}")
    deviations = []
    for number, entry in enumerate(entries, 1):
        where = f"{source}: deviation {number}"
        if not isinstance(entry, dict):
            raise PreregistrationError(f"{where}: expected a mapping with fields {', '.join(DEVIATION_FIELDS)}")
        missing = [f for f in DEVIATION_FIELDS if f not in entry]
        unknown = sorted(set(entry) - set(DEVIATION_FIELDS))
        if missing:
            raise PreregistrationError(f"{where}: missing field(s) {', '.join(missing)}")
        if unknown:
            raise PreregistrationError(
                f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(DEVIATION_FIELDS)})"
            )
        for field in ("cell", "parameter", "reason"):
            if not isinstance(entry[field], str) or not entry[field].strip():
                raise PreregistrationError(f"{where}: field '{field}' must be a non-empty string")
        deviations.append(Deviation(**{f: entry[f] for f in DEVIATION_FIELDS}))
    return deviations


def load_deviations(path: str | Path) -> list[Deviation]:
    """The declared deviations; a missing file declares none."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        entries = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise PreregistrationError(f"{path}: not YAML ({yaml_error(e)})") from None
    return parse_deviations(entries, str(path))


def protocol_differences(plan: dict, effective_protocol: dict) -> list[tuple[str, Any, Any]]:
    """(parameter, registered, used) for every parameter whose effective value differs, in plan order
    (a parameter the plan does not name, ``load.UNNAMED_DEFAULTS``, against its registered rule)."""
    registered = registered_protocol(plan)
    unknown = sorted(set(effective_protocol) - set(registered))
    if unknown:
        raise PreregistrationError(
            f"effective protocol names parameters the plan does not register: {', '.join(unknown)}"
        )
    return [
        (k, v, effective_protocol[k])
        for k, v in registered.items()
        if k in effective_protocol and effective_protocol[k] != v
    ]


def _declaration(cell: str, difference: tuple[str, Any, Any], deviations: list[Deviation]) -> Deviation | None:
    parameter, registered, used = difference
    return next(
        (
            d
            for d in deviations
            if d.cell in (cell, ANY_CELL) and d.parameter == parameter and d.registered == registered and d.used == used
        ),
        None,
    )


def undeclared_differences(
    cell: str, effective_protocol: dict, plan: dict, deviations: list[Deviation]
) -> list[tuple[str, Any, Any]]:
    """The cell's differences from the plan that no deviation declares (the audit lists them all)."""
    return [d for d in protocol_differences(plan, effective_protocol) if _declaration(cell, d, deviations) is None]


def undeclared_message(cell: str, difference: tuple[str, Any, Any]) -> str:
    parameter, registered, used = difference
    return (
        f"cell {cell}: protocol parameter '{parameter}' is {used!r} but the plan registers {registered!r}, "
        "and preregistration/deviations.yaml declares no such deviation"
    )


def check_cell(cell: str, effective_protocol: dict, plan: dict, deviations: list[Deviation]) -> list[Deviation]:
    """The declared deviations covering the cell's differences from the plan.

    A difference is declared by an entry for this cell (or "*") naming the parameter with the
    same registered and used values; any other difference stops the run.
    """
    declared = []
    for difference in protocol_differences(plan, effective_protocol):
        found = _declaration(cell, difference, deviations)
        if found is None:
            raise PreregistrationError(undeclared_message(cell, difference))
        declared.append(found)
    return declared


def declared_deviations(
    cells: list[str], confirmatory: list[str], protocols: dict[str, dict], plan: dict, deviations: list[Deviation]
) -> dict[str, dict]:
    """plan_check.json's content: per cell, whether it is confirmatory, its declared deviations
    (confirmatory cells, registered variant) and, for exploratory cells, its differences."""
    if confirmatory and REGISTERED_VARIANT not in protocols:
        raise PreregistrationError(f"confirmatory cells need a variant named '{REGISTERED_VARIANT}'")
    out = {}
    for cell in cells:
        if cell in confirmatory:
            found = check_cell(cell, protocols[REGISTERED_VARIANT], plan, deviations)
            out[cell] = {"confirmatory": True, "deviations": [d.as_dict() for d in found]}
        else:
            out[cell] = {
                "confirmatory": False,
                "differences": {
                    v: [{"parameter": p, "registered": r, "used": u} for p, r, u in protocol_differences(plan, proto)]
                    for v, proto in sorted(protocols.items())
                },
            }
    return out


def plan_check(
    plan_path: str | Path, cells: list[str], confirmatory: list[str], protocols: dict[str, dict], plan: dict
) -> dict:
    """The check at the head of the DAG: the registered hash, then every confirmatory cell."""
    registered_path, deviations_path = sibling_paths(plan_path)
    sha = check_registered(plan_path, registered_path)
    cells_out = declared_deviations(cells, confirmatory, protocols, plan, load_deviations(deviations_path))
    return {"plan_sha256": sha, "registered": read_registered(registered_path), "cells": cells_out}


def write_plan_check(plan_path, config: dict, out) -> dict:
    """checks/plan_check.json: the registered hash and every confirmatory cell's declared deviations;
    raises on an edited plan or an undeclared deviation. It reads the config's cells, confirmatory,
    protocol and variants only (PLAN_CHECK_KEYS): the rule check_plan is given no other part."""
    plan = load_plan(plan_path)
    check = plan_check(
        plan_path, list(config["cells"]), list(config.get("confirmatory", [])), study_protocols(config, plan), plan
    )
    write_json(check, out)
    return check


PLAN_CHECK_KEYS = ("cells", "confirmatory", "protocol", "variants")
