"""The reviewer's check of the registration (issue 48; docs/reference.md section 7, "The registration").

Three parts, each verified or said not to be, in the line the audit prints first:

1. REGISTERED freezes the plan's sha256 (``cotdyn.plan.attestation``);
2. its timestamp token is over that registration and signed by an authority whose CA the reviewer
   gives (``--tsa-ca``), and no earlier than the date REGISTERED gives, nor later than the
   study's first generation record (the author's own clock: "registered after generation began");
3. generation is time-locked to it: every samples row's seed is recomputed from the registration's
   lock and the row's (problem, prefix, sample), without the model; ``--regenerate`` then shows
   the samples follow from those seeds.

A later version that changes only the analysis is locked to an earlier registration, verified here
from that registration's own plan, REGISTERED and token (``cotdyn.plan.attestation.earlier_registration``):
its token against the CA, its time against the first generation record, its plan against this one.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import os

import pandas as pd

from cotdyn.files.strict import UntrustedFileError, read_bytes, read_json
from cotdyn.files.terminal import printable
from cotdyn.plan.attestation import earlier_registration, read_registration, verified_attestation
from cotdyn.plan.registered import POWER_NAME, read_registered, sibling_paths
from cotdyn.plan.registration import PreregistrationError
from cotdyn.plan.timelock import FIRST_LOCKED_VERSION, LOCK_FIELD, TimeLockError
from cotdyn.protocol.seeds import served_seed

# The generation logs whose start times say when generation began (the author's clock).
GENERATION_LOGS = "cells/*/reference/*/generation.json", "cells/*/*/generation.json"
STARTED = "started_utc"
UNREGENERATED = "samples not regenerated (--regenerate N)"
SEEDS_VERIFIED = ": seeds verified"


def registration_check(plan_path, plan: dict, view, tsa_ca) -> tuple[str, str | None, list[str]]:
    """The registration part of the audit's first line, the time lock's head for a later version
    locked to an earlier registration (None otherwise), and their problems; the generation logs
    read through the study's view (``cotdyn.audit.view.StudyView``).

    A token is compared with the study's first generation record only where generation is locked
    to it: a later, analysis-only version is registered after the data by design, and says so."""
    try:
        registration = read_registration(plan_path)
    except PreregistrationError as e:
        return f"plan {plan_path}: not registered", None, [str(e)]
    attestation, problems = verified_attestation(registration, tsa_ca)
    problems = list(registration.problems) + problems
    try:
        earlier = earlier_registration(plan, plan_path)
    except (TimeLockError, OSError) as e:
        return registration.line(attestation), None, [*problems, printable(str(e))]
    began = generation_began(view)
    if earlier is None:
        return registration.line(attestation), None, problems + _after_generation(registration, began, "the ")
    problems += earlier.problems
    head = (
        f"analysis {registration.when()}, after the data; generation locked to the registration of "
        f"{earlier.date()} ({earlier.registered_path}"
    )
    if earlier.registration is not None:
        words, found = verified_attestation(earlier.registration, tsa_ca)
        problems += found + _after_generation(earlier.registration, began, "the earlier registration's ")
        head += f"; {words}" if words else ""
    return registration.line(attestation), head + ")", problems


MAX_POWER_BYTES = 4 << 20


def power_check(plan_path, plan: dict, recompute: bool) -> tuple[str | None, list[str]]:
    """The power table's part of the audit's first line and its problems (plan v5 on; None for a
    plan that states no assumed effects): the stored table (power.json beside REGISTERED) against
    the sha256 REGISTERED records; with ``recompute`` (cotdyn audit --power) the table computed
    again from the plan and its seed, against the same sha256. Without it the line says the table
    was not recomputed: a hash that matches vouches for the file, not for the power."""
    from cotdyn.analysis import power

    if power.SECTION not in plan:
        return None, []
    registered_path = sibling_paths(plan_path)[0]
    try:
        record = read_registered(registered_path)
    except PreregistrationError as e:
        return "power table: not checked", [str(e)]
    sha = record.get("power_table_sha256")
    if sha is None:
        return "power table: none registered", [
            f"{registered_path}: the plan states {power.SECTION} but its registration records no power table"
        ]
    stored = registered_path.with_name(POWER_NAME)
    problems = []
    try:  # strictly: a regular file of at most MAX_POWER_BYTES (the panel's is 31 kB)
        if hashlib.sha256(read_bytes(stored, max_bytes=MAX_POWER_BYTES)).hexdigest() != sha:
            problems.append(f"{stored}: its sha256 is not the one {registered_path} records (power_table_sha256)")
    except UntrustedFileError as e:
        problems.append(f"power table: {printable(str(e))}")
    under = f"; underpowered at registration ({record['underpowered']})" if record.get("underpowered") else ""
    if not recompute:
        words = "FAILED" if problems else "its hash checked against REGISTERED, not recomputed (cotdyn audit --power)"
        return f"power table: {words}{under}", problems
    try:
        found = power.table_sha256(power.registered_table(plan, os.cpu_count() or 1))
    except (power.PowerInputError, KeyError, ValueError) as e:
        return "power table: FAILED (not recomputed)", [*problems, f"power table: {printable(str(e))}"]
    if found != sha:
        problems.append(
            f"power table: recomputed from the plan and its seed, sha256 {found}; {registered_path} records {sha}"
        )
    words = "FAILED" if problems else "verified (recomputed from the plan and its seed)"
    return f"power table: {words}{under}", problems


def _after_generation(registration, began, whose: str) -> list[str]:
    if registration.attested_time is None or began is None or registration.attested_time <= began:
        return []
    return [
        f"registered after generation began: {whose}timestamp token's time "
        f"{registration.attested_time:%Y-%m-%d %H:%M:%S} UTC is after the study's first generation record "
        f"({began:%Y-%m-%d %H:%M:%S} UTC, the author's clock)"
    ]


def generation_logs(entries) -> list[str]:
    """The generation logs among the admission's walk (relative paths), in ``GENERATION_LOGS`` order."""
    patterns = [pattern.split("/") for pattern in GENERATION_LOGS]
    return [
        rel
        for pattern in patterns
        for rel in sorted(entries)
        if len(rel.split("/")) == len(pattern) and all(map(fnmatch.fnmatchcase, rel.split("/"), pattern))
    ]


def generation_began(view) -> datetime.datetime | None:
    """The earliest start a generation log of the study records (None where none does), each log
    read once it is still the regular file the admission found (``StudyView.current``), bounded."""
    times = []
    for rel in generation_logs(view.entries):
        try:  # strictly: a regular file, bounded (a FIFO here must not hang the audit)
            stamp = read_json(view.current(rel), max_bytes=1 << 20).get(STARTED)
            times.append(datetime.datetime.fromisoformat(stamp))
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # an unreadable or replaced log is the manifest comparison's to name
    aware = [t for t in times if t.tzinfo is not None]
    return min(aware) if aware else None


def seeds_checked(path: str, chains: str | None, protocol: dict, refused: dict) -> bool:
    """Whether the audit checks the seeds of raw file ``path`` (``audit.raw.seeds_of``): a samples
    file of a time-locked protocol, neither it nor its chains refused."""
    return chains is not None and path not in refused and chains not in refused and LOCK_FIELD in protocol


def seed_check(
    path: str, seeds: pd.Series, requests: list[tuple[int, int]], width: int | None
) -> tuple[int, str | None]:
    """(rows checked, the problem or None) of one samples file's ``seeds`` against its ``requests``'
    (each request's seed and n; ``width``: the seeds its backend's sampler honours)."""
    expected = [served_seed(seed + j, width) for seed, n in requests for j in range(n)]
    stored = seeds.astype("int64").tolist()
    wrong = [i for i, (a, b) in enumerate(zip(stored, expected)) if a != b]
    if not wrong:
        return len(stored), None
    i = wrong[0]
    return len(stored), (
        f"{path}: {len(wrong)} of {len(stored)} rows' seeds are not this registration's (row {i}: seed "
        f"{stored[i]}, the registration gives {expected[i]}): samples drawn under another registration's seeds"
    )


def seeds_unchecked(path: str, e: Exception) -> str:
    return f"{path}: seeds not checked: {type(e).__name__}: {printable(str(e))[:200]}"


def time_lock_status(
    protocols: dict[str, dict], checked: int, problems: list[str], earlier: str | None = None, version: int = 1
) -> str:
    """The time-lock part of the audit's first line, before any regeneration (``earlier``: a later
    version's lock to an earlier registration, in words; ``version``: the plan's)."""
    if not any(LOCK_FIELD in p for p in protocols.values()):
        return (
            f"generation not time-locked (plan version {version} predates time_lock, which plan "
            f"v{FIRST_LOCKED_VERSION} introduced)"
        )
    head = earlier or "generation time-locked to this registration"
    if problems:
        return f"{head}: FAILED (the seeds are not the registration's)"
    return f"{head}{SEEDS_VERIFIED} ({checked} samples rows); {UNREGENERATED}"


def regenerated_lock(status: str, regenerated: int) -> str:
    """The time-lock part once ``regenerated`` requests were drawn again and all equal: the samples
    follow from the seeds the rows were checked to hold."""
    return f"{status.split(SEEDS_VERIFIED)[0]}: verified ({regenerated} regenerated)"


def seeds_honoured(cells: dict) -> dict:
    """cell -> the seeds its backend's sampler honours (None: every seed), as its declaration says."""
    from cotdyn.generation.backends import registry

    honoured = {}
    for name, cell in cells.items():
        try:
            honoured[name] = registry.seeds_honoured(cell.model)
        except (ValueError, KeyError):  # an unknown backend: admission names it; its seeds compare in full
            honoured[name] = None
    return honoured
