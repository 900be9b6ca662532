"""``cotdyn register`` and ``cotdyn audit`` (docs/reference.md section 7); wired in by ``add_subcommands``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cotdyn.files.terminal import printable


def cmd_register(args) -> int:
    from cotdyn.analysis import power
    from cotdyn.plan import timestamp
    from cotdyn.plan.attestation import registration_line
    from cotdyn.plan.load import load_plan
    from cotdyn.plan.plan_md import render_plan_md
    from cotdyn.plan.registered import POWER_NAME, registration_date
    from cotdyn.plan.registration import PreregistrationError, register
    from cotdyn.plan.schema import validate_plan

    try:
        plan = load_plan(args.plan)
        validate_plan(plan, args.plan)  # a plan with m: five is never registered
        analysis_settings(plan, args.plan)  # nor one whose analysis misses a key its version needs
        assumed_effects(plan, args.plan)  # nor one whose assumed effects are incomplete, out of range or impossible
        if args.date is not None:
            registration_date(args.date)  # a bad date is named before the power table's minutes, not after
        if Path(args.registered).exists():
            raise PreregistrationError(f"{args.registered} exists: a registration is never overwritten")
        table, underpowered = power_table(plan, args.plan, args.underpowered)
        token = None
        if args.timestamp_url and args.timestamp_token:
            raise PreregistrationError("--timestamp-url and --timestamp-token: give one")
        if args.timestamp_url:
            token = timestamp.fetch_token(args.timestamp_url, timestamp.read_plan_bytes(args.plan))
        elif args.timestamp_token:
            token = timestamp.read_token_bytes(args.timestamp_token)
        register(
            args.plan,
            args.registered,
            args.date,
            token,
            args.registry_url,
            args.tsa_ca,
            power.table_bytes(table) if table is not None else None,
            underpowered,
        )
        line = registration_line(args.plan, args.registered, args.tsa_ca)
        if table is not None:
            # plan.md shows the table as registered: read back from its bytes
            written = json.loads(Path(args.registered).with_name(POWER_NAME).read_text())
            Path(args.plan).with_name("plan.md").write_text(render_plan_md(plan, written))
    except (PreregistrationError, ValueError) as e:  # TimestampError, TimeLockError and load_plan's are ValueErrors
        print(f"error: {printable(str(e))}", file=sys.stderr)
        return 1
    except OSError as e:
        print(printable(f"error: {e.filename or args.plan}: {e.strerror or e}"), file=sys.stderr)
        return 1
    print(printable(f"registered: {line}"))
    if table is not None:
        print("\n".join(power.table_lines(table)))
        if underpowered:
            print(printable(f"registered underpowered (--underpowered): {underpowered}"))
    return 0


def analysis_settings(plan: dict, source) -> None:
    """The plan's analysis settings as the analysis reads them (a v4 plan must name every rule,
    and may not carry v1-v3's criterion.over), or a PreregistrationError naming the plan."""
    from cotdyn.analysis.hypotheses import Settings
    from cotdyn.plan.registration import PreregistrationError

    try:
        Settings.from_plan(plan)
    except (KeyError, ValueError, TypeError) as e:
        raise PreregistrationError(f"{source}: {e.args[0] if e.args else e}") from None


def assumed_effects(plan: dict, source) -> None:
    """A plan that states the effects it is powered for (``assumed_effects``, cotdyn.analysis.power)
    states them complete, in range and possible, or a PreregistrationError naming the plan and the
    key; plans v1-v4 state none."""
    from cotdyn.analysis import power
    from cotdyn.plan.registration import PreregistrationError

    if power.SECTION in plan:
        try:
            power.assumed_effects(plan)
        except power.PowerInputError as e:
            raise PreregistrationError(f"{source}: {e}") from None


def power_table(plan: dict, source, declared_underpowered: bool) -> tuple[dict | None, str | None]:
    """The plan's power table at its registered replicates, seed and scales (None for a plan that
    states no assumed effects), and its underpowered hypotheses in words; a plan below its min_power
    registers only with ``--underpowered``, and the flag on a plan that reaches it is refused."""
    from cotdyn.analysis import power
    from cotdyn.plan.registration import PreregistrationError

    if power.SECTION not in plan:
        if declared_underpowered:
            raise PreregistrationError(f"--underpowered: {source} states no {power.SECTION}, so no power to declare")
        return None, None
    try:
        table = power.registered_table(plan, os.cpu_count() or 1, progress=True)
    except power.PowerInputError as e:
        raise PreregistrationError(f"{source}: {e}") from None
    below = "; ".join(power.underpowered(table)) or None
    if below and not declared_underpowered:
        print("\n".join(power.table_lines(table)), file=sys.stderr)
        raise PreregistrationError(
            f"{source} is underpowered at registration: {below}. Change the plan (more problems, a larger "
            "assumed effect, a lower min_power), or register it as it is with --underpowered"
        )
    if declared_underpowered and not below:
        raise PreregistrationError(
            f"--underpowered: every powered hypothesis of {source} reaches its min_power; nothing to declare"
        )
    return table, below


def cmd_audit(args) -> int:
    from cotdyn.audit.check import audit, write_report

    report = audit(args.study_dir, args.plan, args.scratch, args.cache, tsa_ca=args.tsa_ca, power=args.power)
    if args.regenerate is not False:
        from cotdyn.audit.regenerate import regenerate_into

        if report.registration:  # first, before regeneration's progress: what is being verified
            print(printable(report.registration))

        regenerate_into(
            report, args.study_dir, args.plan, args.cache, args.regenerate, args.seed, args.tolerance, args.model
        )
    print(report.text())
    if args.report:
        try:
            write_report(report, args.report)
        except OSError as e:  # a read-only study folder, a missing folder: named, never a traceback
            where = printable(str(args.report))
            print(printable(f"error: the report was not written to {where}: {e.strerror or e}"), file=sys.stderr)
            return 1
    return 0 if report.ok else 1


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    r = subparsers.add_parser("register", help="freeze the plan: write its sha256 and date to REGISTERED")
    r.add_argument("--plan", default="preregistration/plan.yaml")
    r.add_argument("--registered", default="preregistration/REGISTERED", help="refuses to overwrite")
    r.add_argument(
        "--date",
        default=None,
        help="the author's registration date, YYYY-MM-DD (required without a timestamp token; with one, the "
        "token's time is the registration's and this date may not precede it)",
    )
    r.add_argument(
        "--timestamp-url",
        default=None,
        metavar="URL",
        help="an RFC 3161 timestamp authority: its token over the plan is stored beside REGISTERED (REGISTERED.tsr)",
    )
    r.add_argument(
        "--timestamp-token",
        default=None,
        metavar="FILE",
        help="a token over the plan obtained elsewhere (openssl ts -query -data plan.yaml -sha256 -cert, then curl)",
    )
    r.add_argument(
        "--registry-url", default=None, metavar="URL", help="the public registration (OSF, AsPredicted, a DOI)"
    )
    r.add_argument(
        "--tsa-ca",
        default=None,
        metavar="FILE",
        help="the timestamp authority's CA certificate (PEM): the token is verified against it before the "
        "study is locked to it (a token it does not verify is refused)",
    )
    r.add_argument(
        "--underpowered",
        action="store_true",
        help="register a plan whose power table puts a hypothesis below its min_power; REGISTERED records it and "
        "every report page says so",
    )
    r.set_defaults(run=cmd_register)

    a = subparsers.add_parser("audit", help="re-derive a finished study's outputs and compare with its manifest")
    a.add_argument("study_dir", help="results/<study>")
    a.add_argument("--plan", default=None, help="the plan (default: the one the study's config names)")
    a.add_argument("--scratch", default=None, help="keep the re-derived files here (default: a temporary directory)")
    a.add_argument("--report", default=None, help="also write the report as JSON here")
    a.add_argument(
        "--power",
        action="store_true",
        help="also recompute the plan's power table from the plan and its seed and compare it with REGISTERED's hash "
        "(minutes at the panel's scale; without it only the stored table's hash is checked)",
    )
    a.add_argument(
        "--cache",
        default=None,
        help="the generation cache to compare the raw files with, opened read-only (default: the study config's, "
        "if it lies in the study, the folder its results/ lies in, or this checkout)",
    )
    from cotdyn.audit.regenerate import TOLERANCES, count_argument

    a.add_argument(
        "--regenerate",
        metavar="N|all",
        type=count_argument,
        default=False,
        help="also generate N of the study's requests again with its model (or all) and compare them with the rows",
    )
    a.add_argument("--seed", type=int, default=0, help="the reviewer's seed that picks the requests to regenerate")
    a.add_argument(
        "--tolerance",
        choices=TOLERANCES,
        default="exact",
        help="exact: every sample token-identical; answers: for a backend that is not bit-reproducible, the "
        "share of token-exact requests and an answer-agreement test (docs/tamper-evidence.md)",
    )
    a.add_argument(
        "--tsa-ca",
        default=None,
        metavar="FILE",
        help="the timestamp authority's CA certificate (PEM) you trust: the registration's token is verified "
        "against it (without it: 'timestamp present, not verified')",
    )
    a.add_argument("--model", default=None, help="the model's weights (a folder or hub id) in place of the config's")
    a.set_defaults(run=cmd_audit)
