"""``cotdyn ls``: what is registered, and where each comes from (issue 50; lm-eval's ``ls tasks``).

- backends: found through entry points (group ``cotdyn.backends``), each with the package (name and
  version) that declares it, the environment its jobs run in, and each package its declaration
  requires, with the version installed here or what is wrong with it; a plugin that fails to load is
  listed with its error;
- benchmarks and signals: from their registries (cotdyn.grading.registry, cotdyn.protocol.signals),
  found through entry points too (groups ``cotdyn.benchmarks``, ``cotdyn.signals``), each with its
  package, and a plugin that failed with its error;
- plans: each registered plan under ``--preregistration`` (plan.yaml and v*/plan.yaml), its version,
  the sha256 and date its REGISTERED records, and whether the file still has that sha256.

``cotdyn ls [KIND ...] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cotdyn import plugins
from cotdyn.files.terminal import printable

KINDS = ("backends", "benchmarks", "signals", "plans")


def backends() -> list[dict]:
    from cotdyn.generation.backends import registry

    rows = []
    for name, declared in registry.REGISTRY.items():
        requires = [
            {
                "requirement": d.requirement,
                "installed": plugins.installed_version(d.package),
                "problem": plugins.dependency_problem(d),
            }
            for d in declared.requires
        ]
        rows.append(
            {
                "name": name,
                "package": registry.package_of(name),
                "environments": list(declared.environments),
                "settings": list(declared.settings),
                "requires": requires,
                "summary": declared.summary,
            }
        )
    return rows + _broken(registry.BROKEN)


def _broken(broken: dict) -> list[dict]:
    return [{"name": name, "package": None, "error": str(error)} for name, error in broken.items()]


def benchmarks() -> list[dict]:
    from cotdyn.grading import registry

    rows = [
        {"name": name, "package": registry.package_of(name), "answer": declared.answer}
        for name, declared in registry.REGISTRY.items()
    ]
    return rows + _broken(registry.BROKEN)


def signals() -> list[dict]:
    from cotdyn.protocol import signals

    rows = [
        {"name": name, "package": signals.package_of(name), "registered": signal.registered}
        for name, signal in signals.SIGNALS.items()
    ]
    return rows + _broken(signals.BROKEN)


def plans(folder: str | Path) -> list[dict]:
    """Every plan.yaml under ``folder`` (its own and its v*/ versions') with its REGISTERED record."""
    import yaml

    from cotdyn.plan.load import plan_sha256
    from cotdyn.plan.registered import PreregistrationError, read_registered, sibling_paths

    folder = Path(folder)
    rows = []
    for path in sorted([folder / "plan.yaml", *folder.glob("v*/plan.yaml")], key=lambda p: str(p)):
        if not path.is_file():
            continue
        row = {"path": str(path), "plan_version": None, "sha256": None, "date": None, "matches": None}
        try:
            version = yaml.safe_load(path.read_text()).get("plan_version")
            row["plan_version"] = version if isinstance(version, int) else None
        except (yaml.YAMLError, AttributeError, UnicodeDecodeError):
            row["error"] = "not a YAML mapping"
        try:
            registered = read_registered(sibling_paths(path)[0])
            row.update(sha256=registered["plan_sha256"], date=registered["date"])
            row["matches"] = plan_sha256(path) == registered["plan_sha256"]
        except PreregistrationError as e:
            row["error"] = str(e)
        rows.append(row)
    return sorted(rows, key=lambda r: (r["plan_version"] is None, r["plan_version"] or 0, r["path"]))


def listing(kinds: list[str], preregistration: str) -> dict[str, list[dict]]:
    gather = {
        "backends": backends,
        "benchmarks": benchmarks,
        "signals": signals,
        "plans": lambda: plans(preregistration),
    }
    return {kind: gather[kind]() for kind in kinds}


def _backend_line(row: dict) -> str:
    needs = ", ".join(
        f"{r['requirement']} ({r['problem'] or r['installed']})"
        if r["problem"]
        else f"{r['requirement']} ({r['installed']})"
        for r in row["requires"]
    )
    return (
        f"  {row['name']:<16} {row['package']:<20} runs in {'|'.join(row['environments'])}"
        f"; takes {', '.join(row['settings']) or 'no device or dtype'}; requires {needs or 'nothing beyond cotdyn'}"
    )


def _plan_line(row: dict) -> str:
    version = f"v{row['plan_version']}" if row["plan_version"] is not None else "v?"
    if row["sha256"] is None:
        return f"  {version:<4} {row['path']:<32} {row.get('error', 'not registered')}"
    state = "matches" if row["matches"] else "DIFFERS from the file"
    return f"  {version:<4} {row['path']:<32} sha256 {row['sha256']} ({state}), registered {row['date']}"


def render(listed: dict[str, list[dict]]) -> str:
    lines = []
    for kind, rows in listed.items():
        lines.append(f"{kind} ({len(rows)})")
        for row in rows:
            if kind == "plans":
                lines.append(_plan_line(row))
            elif "error" in row:  # a plugin that failed to load
                lines.append(f"  {row['name']:<16} BROKEN: {row['error']}")
            elif kind == "backends":
                lines.append(_backend_line(row))
            elif kind == "benchmarks":
                lines.append(f"  {row['name']:<16} {row['package']:<20} answer: {row['answer']}")
            else:
                read = "read by registered analyses" if row["registered"] else "exploratory"
                lines.append(f"  {row['name']:<16} {row['package']:<20} {read}")
    # names, versions and paths come from packages' metadata and files: a control character in one is
    # escaped, so that it cannot forge a line of the listing
    return "\n".join(printable(line) for line in lines)


def cmd_ls(args) -> int:
    unknown = [kind for kind in args.kinds if kind not in KINDS]
    if unknown:
        print(f"error: cotdyn ls {printable(unknown[0])}: not a kind (known: {', '.join(KINDS)})", file=sys.stderr)
        return 2
    from cotdyn.plan.config import bundled

    listed = listing(args.kinds or list(KINDS), bundled(args.preregistration))
    if args.json:
        print(json.dumps(listed, indent=2))
    else:
        print(render(listed))
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    ls = subparsers.add_parser(
        "ls", help="list the backends, benchmarks, signals and registered plans, and the package each comes from"
    )
    ls.add_argument("kinds", nargs="*", metavar="KIND", help=f"any of {', '.join(KINDS)} (default: all)")
    ls.add_argument("--json", action="store_true", help="one JSON object, by kind")
    ls.add_argument(
        "--preregistration",
        default="preregistration",
        help="the folder of registered plans: plan.yaml and v*/plan.yaml (default: preregistration, or the "
        "one cotdyn ships where the working directory has none)",
    )
    ls.set_defaults(run=cmd_ls)
