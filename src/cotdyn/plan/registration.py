"""Preregistration as code (docs/reference.md section 7): the registered hash, declared deviations, plan.md.

``preregistration/REGISTERED`` freezes the sha256 of ``plan.yaml`` and the registration date.
A confirmatory cell may run only if the plan still has that hash and every difference between
the cell's effective protocol and the plan's frozen protocol is declared in
``preregistration/deviations.yaml``. ``plan.md`` is rendered from ``plan.yaml`` so the two
cannot drift.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cotdyn.files.strict import UntrustedFileError, read_yaml
from cotdyn.files.writers import write_json
from cotdyn.plan.attestation import earlier_registration_problems, read_registration
from cotdyn.plan.config import confirmatory_cells, limited_scope, study_limit, study_protocols
from cotdyn.plan.load import load_plan, plan_sha256, registered_protocol
from cotdyn.plan.registered import (  # noqa: F401  (the names callers import from here)
    POWER_NAME,
    REGISTERED_FIELDS,
    TOKEN_NAME,
    PreregistrationError,
    read_registered,
    registered_text,
    registration_date,
    sibling_paths,
)

# The variant whose protocol a confirmatory cell is held to; other variants are sensitivity
# analyses reported against it (docs/reference.md section 6), so their differences are not deviations.
REGISTERED_VARIANT = "registered"
DEVIATION_FIELDS = ("cell", "parameter", "registered", "used", "reason")
ANY_CELL = "*"


@dataclass(frozen=True)
class Deviation:
    cell: str  # a cell name, or "*" for every confirmatory cell
    parameter: str
    registered: Any
    used: Any
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


# --- REGISTERED ---------------------------------------------------------------------------


def register(
    plan_path: str | Path,
    registered_path: str | Path,
    date: str | None = None,
    token: bytes | None = None,
    registry_url: str | None = None,
    tsa_ca: str | Path | None = None,
    power_table: bytes | None = None,
    underpowered: str | None = None,
) -> str:
    """Freeze the plan: write its sha256 and the author's ``date`` to ``registered_path``, and a
    timestamp ``token`` over the plan (RFC 3161, cotdyn.plan.timestamp) beside it; return the hash.
    ``power_table``: the plan's power table (``cotdyn.analysis.power.table_bytes``), written beside
    it (POWER_NAME) with its sha256 in REGISTERED; ``underpowered``: the hypotheses below min_power
    the author registers anyway, in words, recorded in REGISTERED.

    Without ``date`` the token's day is the author's date. Refuses to overwrite: a plan is
    registered once, and a new plan is a new registration. Refuses a token over another plan, an
    author's date earlier than the token's (a registration cannot predate its attestation), and a
    token no reviewer could verify: one that embeds no certificate, or, given ``tsa_ca`` (the
    authority's CA certificate), one whose signature does not chain to it. The token is stored
    with its certificates in DER's order (``timestamp.normalized_reply``)."""
    from cotdyn.plan.timestamp import TimestampError, normalized_reply, parse_token, verify_token

    registered_path = Path(registered_path)
    token_path = registered_path.with_name(TOKEN_NAME)
    power_path = registered_path.with_name(POWER_NAME)
    for existing in (registered_path, token_path, *([power_path] if power_table is not None else [])):
        if existing.exists() or existing.is_symlink():
            raise PreregistrationError(f"{existing} exists: a registration is never overwritten")
    load_plan(plan_path)  # a plan that does not load (duplicate keys, bad YAML, no lock) is never registered
    sha = plan_sha256(plan_path)
    parsed = None
    if token is not None:
        try:
            token = normalized_reply(token, "the timestamp token")
            parsed = parse_token(token, "the timestamp token")
            if tsa_ca is not None:
                verify_token(token, sha, tsa_ca, "the timestamp token")
        except TimestampError as e:
            raise PreregistrationError(str(e)) from None
        _check_token(parsed, sha, plan_path)
        attested = parsed.gen_time.date().isoformat()
        date = attested if date is None else registration_date(date)
        if date < attested:
            raise PreregistrationError(f"--date {date} is earlier than the timestamp token's time ({attested})")
    if date is None:
        raise PreregistrationError("--date YYYY-MM-DD is required without a timestamp token")
    power_sha256 = hashlib.sha256(power_table).hexdigest() if power_table is not None else None
    text = registered_text(
        sha, date, parsed and parsed.sha256, registry_url, parsed and parsed.signed_sha256, power_sha256, underpowered
    )  # the date is checked before anything is written
    if token is not None:
        token_path.write_bytes(token)
    if power_table is not None:
        power_path.write_bytes(power_table)
    registered_path.write_text(text)
    return sha


def _check_token(parsed, sha: str, plan_path) -> None:
    if parsed.imprint_sha256 != sha:
        raise PreregistrationError(
            f"the timestamp token is over sha256 {parsed.imprint_sha256}, but {plan_path} has sha256 {sha}: "
            "it attests another plan"
        )
    if not parsed.certificates:
        raise PreregistrationError(
            "the timestamp token embeds no certificate, so no reviewer could verify it: ask the authority "
            "for one that does (openssl ts -query ... -cert, or --timestamp-url)"
        )


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
    if not path.exists() and not path.is_symlink():  # a dangling link is named, not taken for none
        return []
    try:  # strictly: a regular file, bounded, no key twice, no alias bomb
        entries = read_yaml(path)
    except UntrustedFileError as e:
        raise PreregistrationError(str(e)) from None
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


def undeclared_message(cell: str, difference: tuple[str, Any, Any], deviations_path=None) -> str:
    """``deviations_path``: the study's own deviations.yaml, named in the message (else "the plan's")."""
    parameter, registered, used = difference
    where = deviations_path if deviations_path is not None else "the plan's deviations.yaml"
    return (
        f"cell {cell}: protocol parameter '{parameter}' is {used!r} but the plan registers {registered!r}, "
        f"and {where} declares no such deviation (declare it there, or drop the override)"
    )


def check_cell(
    cell: str, effective_protocol: dict, plan: dict, deviations: list[Deviation], deviations_path=None
) -> list[Deviation]:
    """The declared deviations covering the cell's differences from the plan.

    A difference is declared by an entry for this cell (or "*") naming the parameter with the
    same registered and used values; any other difference stops the run.
    """
    declared = []
    for difference in protocol_differences(plan, effective_protocol):
        found = _declaration(cell, difference, deviations)
        if found is None:
            raise PreregistrationError(undeclared_message(cell, difference, deviations_path))
        declared.append(found)
    return declared


def declared_deviations(
    cells: list[str],
    confirmatory: list[str],
    protocols: dict[str, dict],
    plan: dict,
    deviations: list[Deviation],
    deviations_path=None,
) -> dict[str, dict]:
    """plan_check.json's content: per cell, whether it is confirmatory, its declared deviations
    (confirmatory cells, registered variant) and, for exploratory cells, its differences."""
    if confirmatory and REGISTERED_VARIANT not in protocols:
        raise PreregistrationError(f"confirmatory cells need a variant named '{REGISTERED_VARIANT}'")
    out = {}
    for cell in cells:
        if cell in confirmatory:
            found = check_cell(cell, protocols[REGISTERED_VARIANT], plan, deviations, deviations_path)
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
    """The check at the head of the DAG: the registered hash, the registration's token and the
    registration a later version's generation is locked to (cotdyn.plan.attestation), then every
    confirmatory cell."""
    registered_path, deviations_path = sibling_paths(plan_path)
    sha = check_registered(plan_path, registered_path)
    registration = read_registration(plan_path, registered_path)
    earlier, problems = earlier_registration_problems(plan, plan_path)
    if registration.problems or problems:
        raise PreregistrationError("; ".join([*registration.problems, *problems]))
    deviations = load_deviations(deviations_path)
    cells_out = declared_deviations(cells, confirmatory, protocols, plan, deviations, deviations_path)
    registered = {**read_registered(registered_path), "registration": registration.when()}
    if earlier is not None:
        registered["time_lock"] = earlier
    return {"plan_sha256": sha, "registered": registered, "cells": cells_out}


def write_plan_check(plan_path, config: dict, out) -> dict:
    """checks/plan_check.json: the registered hash and every confirmatory cell's declared deviations;
    raises on an edited plan or an undeclared deviation. It reads the config's cells, confirmatory,
    protocol and variants only (PLAN_CHECK_KEYS): the rule check_plan is given no other part."""
    plan = load_plan(plan_path)
    check = plan_check(
        plan_path, list(config["cells"]), confirmatory_cells(config), study_protocols(config, plan), plan
    )
    if study_limit(config):  # a limited study: descriptive, whatever its config calls confirmatory
        check["limit"] = {"problems": study_limit(config), "scope": limited_scope(study_limit(config))}
    write_json(check, out)
    return check


PLAN_CHECK_KEYS = ("cells", "confirmatory", "protocol", "variants", "limit")
