"""The ``cotdyn`` command line (docs/reference.md section 11), for people with their own traces."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cotdyn.grading import answers


def _json_lines(stream):
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"stdin line {number}: not JSON ({e.msg})")


def _field(obj: dict, key: str, number: int):
    if not isinstance(obj, dict) or key not in obj:
        raise SystemExit(f"stdin line {number}: missing field '{key}'")
    return obj[key]


def _answer_field(obj: dict, key: str, number: int) -> str | None:
    """A text or answer field: a string, a number, or null/blank for none."""
    try:
        return answers.answer_or_none(_field(obj, key, number))
    except TypeError as e:
        raise SystemExit(f"stdin line {number}: field '{key}': {e}")


def _options(obj: dict, number: int) -> list[str] | None:
    """A multiple-choice line's optional option texts, so a choice named by its text counts."""
    options = obj.get("options") if isinstance(obj, dict) else None
    if options is not None and (not isinstance(options, list) or not all(isinstance(o, str) for o in options)):
        raise SystemExit(f"stdin line {number}: field 'options' must be a list of strings")
    return options


def cmd_extract(args) -> int:
    for number, obj in _json_lines(sys.stdin):
        text = _answer_field(obj, "text", number)
        found = answers.extract(text, args.benchmark, _options(obj, number), args.extraction, args.answer_form)
        print(json.dumps({"answer": found.answer, "status": found.status}))
    return 0


def cmd_equivalent(args) -> int:
    for number, obj in _json_lines(sys.stdin):
        a, b = _answer_field(obj, "a", number), _answer_field(obj, "b", number)
        same = answers.equivalent(a, b, args.benchmark, args.method, _options(obj, number), args.answer_form)
        print(json.dumps({"equivalent": same}))
    return 0


def cmd_analyze(args) -> int:
    from cotdyn.analysis.hypotheses import analyze, read_records, write_analysis
    from cotdyn.plan.load import load_plan, plan_sha256

    records = read_records(args.records)
    result = analyze(records, load_plan(args.plan), plan_sha256(args.plan))
    for path in write_analysis(result, records, Path(args.out)):
        print(path)
    return 0


def _answer_form_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--answer-form",
        default=answers.AS_WRITTEN,
        choices=answers.ANSWER_FORMS,
        help="as_written (plans v1-v3: the normalized spelling) or canonical (plan v4: a number is its "
        "value in one form, an integer or a reduced \\frac{p}{q})",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cotdyn", description=__doc__)
    from cotdyn import __version__

    p.add_argument("--version", action="version", version=f"cotdyn {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    from cotdyn.grading.registry import REGISTRY

    benchmarks = [*REGISTRY, *answers.ANSWER_TYPES]

    e = sub.add_parser("extract", help='final answers of JSON lines {"text": ...} on stdin')
    e.add_argument(
        "--benchmark",
        required=True,
        choices=benchmarks,
        help='a registered benchmark or an answer type; a choice line may carry "options": [...]',
    )
    e.add_argument(
        "--extraction",
        default=answers.REGISTERED_EXTRACTION,
        choices=answers.EXTRACTIONS,
        help="final_number (registered: a box, else the final whole number) or final_statement "
        '(sensitivity variant: a box, else the expression of a closing "the final answer is ...")',
    )
    _answer_form_argument(e)
    e.set_defaults(run=cmd_extract)

    q = sub.add_parser("equivalent", help='equivalence of JSON lines {"a": ..., "b": ...} on stdin')
    q.add_argument("--benchmark", required=True, choices=benchmarks)
    q.add_argument(
        "--method",
        default="normalized",
        choices=answers.EQUIVALENCES,
        help="normalized (registered) or math_verify (sensitivity variant: math-verify parses a and b as written)",
    )
    _answer_form_argument(q)
    q.set_defaults(run=cmd_equivalent)

    a = sub.add_parser("analyze", help="the registered analysis of records files")
    a.add_argument("records", nargs="+", help="records.parquet files (cells named by their 'cell' column)")
    a.add_argument("--plan", required=True, help="preregistration/plan.yaml")
    a.add_argument("--out", required=True, help="output directory for hypotheses.json and tables")
    a.set_defaults(run=cmd_analyze)

    from cotdyn.cli.cache import add_subcommand as add_cache
    from cotdyn.cli.init import add_subcommand as add_init
    from cotdyn.cli.ls import add_subcommand as add_ls
    from cotdyn.cli.power import add_subcommand as add_power
    from cotdyn.cli.prereg import add_subcommands

    add_subcommands(sub)
    add_init(sub)
    add_ls(sub)
    add_cache(sub)
    add_power(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:
        # the reader closed the pipe (``cotdyn audit DIR | head -1``): stop quietly, without the
        # traceback, and without a second error when Python flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
