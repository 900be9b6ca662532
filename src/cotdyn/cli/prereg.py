"""``cotdyn register`` and ``cotdyn audit`` (docs/design.md section 7); wired in by ``add_subcommands``."""

from __future__ import annotations

import argparse
import sys

from cotdyn.files.terminal import printable


def cmd_register(args) -> int:
    from cotdyn.plan.registration import PreregistrationError, register

    try:
        sha = register(args.plan, args.registered, args.date)
    except PreregistrationError as e:
        print(f"error: {printable(str(e))}", file=sys.stderr)
        return 1
    except OSError as e:
        print(printable(f"error: {e.filename or args.plan}: {e.strerror or e}"), file=sys.stderr)
        return 1
    print(printable(f"registered {args.plan}: sha256 {sha}, {args.date}"))
    return 0


def cmd_audit(args) -> int:
    from cotdyn.audit.check import audit, write_report

    report = audit(args.study_dir, args.plan, args.scratch, args.cache)
    if args.regenerate is not False:
        from cotdyn.audit.regenerate import regenerate_into

        regenerate_into(
            report, args.study_dir, args.plan, args.cache, args.regenerate, args.seed, args.tolerance, args.model
        )
    print(report.text())
    if args.report:
        write_report(report, args.report)
    return 0 if report.ok else 1


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    r = subparsers.add_parser("register", help="freeze the plan: write its sha256 and date to REGISTERED")
    r.add_argument("--plan", default="preregistration/plan.yaml")
    r.add_argument("--registered", default="preregistration/REGISTERED", help="refuses to overwrite")
    r.add_argument("--date", required=True, help="registration date, YYYY-MM-DD")
    r.set_defaults(run=cmd_register)

    a = subparsers.add_parser("audit", help="re-derive a finished study's outputs and compare with its manifest")
    a.add_argument("study_dir", help="results/<study>")
    a.add_argument("--plan", default=None, help="the plan (default: the one the study's config names)")
    a.add_argument("--scratch", default=None, help="keep the re-derived files here (default: a temporary directory)")
    a.add_argument("--report", default=None, help="also write the report as JSON here")
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
    a.add_argument("--model", default=None, help="the model's weights (a folder or hub id) in place of the config's")
    a.set_defaults(run=cmd_audit)
