"""``cotdyn cache ls|prune``: what the generation cache keeps, and removing what no study references
(cotdyn.generation.cache_inventory). Like ``inspect cache list|prune``; pruning is a dry run unless
``--delete`` is given."""

from __future__ import annotations

from pathlib import Path

from cotdyn.files.terminal import printable
from cotdyn.generation import cache_inventory as C

HOUR = 3600.0


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""  # unreachable


def _name(path: Path) -> str:
    return printable(str(path))  # names in a cache or a study folder are untrusted: no control characters


def _studies(args) -> list[Path]:
    return C.study_folders(args.studies or ["results"])


def cmd_ls(args) -> int:
    found = C.inventory(args.cache)
    studies = _studies(args)
    refs = C.references(found.shards, studies)
    total = sum(s.size for s in found.shards)
    print(f"generation cache {_name(args.cache)}: {len(found.shards)} shard(s), {_size(total)}; "
          f"{len(studies)} stud{'y' if len(studies) == 1 else 'ies'} looked at")  # fmt: skip
    for shard in found.shards:
        what = (
            f"damaged, ignored by the cache ({printable(shard.damaged)})"
            if shard.damaged
            else f"{len(shard.keys)} requests"
        )
        by = ", ".join(_name(s) for s in refs[shard.path]) or "no study"
        print(f"  {_name(shard.path)}  {_size(shard.size)}  {what}  referenced by: {by}")
    for label, paths in (("unfinished (a run's journal or temporary)", found.unfinished),
                         ("link (not followed)", found.links), ("kept (not a shard)", found.other)):  # fmt: skip
        for path in paths:
            print(f"  {_name(path)}  {label}")
    unreferenced = [s for s in found.shards if not refs[s.path]]
    print(f"unreferenced: {len(unreferenced)} shard(s), {_size(sum(s.size for s in unreferenced))}")
    return 0


def cmd_prune(args) -> int:
    found = C.inventory(args.cache)
    refs = C.references(found.shards, _studies(args))
    remove, kept = C.prunable(found, refs, args.min_age_hours * HOUR)
    for shard, why in kept:
        print(f"kept {_name(shard.path)}: referenced by no study, but {why}")
    verb = "removed" if args.delete else "would remove"
    for shard in remove:
        if args.delete:
            C.remove_shard(args.cache, shard)
        print(f"{verb} {_name(shard.path)} ({_size(shard.size)})")
    freed = _size(sum(s.size for s in remove))
    print(f"{verb} {len(remove)} shard(s), {freed}" + ("" if args.delete else "; --delete removes them"))
    return 0


def run(args) -> int:
    try:
        return args.cache_run(args)
    except C.CacheError as e:
        raise SystemExit(f"cotdyn cache: {e}") from None


def add_subcommand(sub) -> None:
    c = sub.add_parser(
        "cache", help="what the generation cache keeps (ls), and removing what no study references (prune)"
    )
    c.set_defaults(run=run)
    actions = c.add_subparsers(dest="cache_command", required=True)
    for name, helptext, func in (
        ("ls", "every shard: size, requests, the studies that reference it", cmd_ls),
        ("prune", "remove the shards no study references (a dry run unless --delete)", cmd_prune),
    ):
        a = actions.add_parser(name, help=helptext)
        a.add_argument(
            "--cache", type=Path, default=Path("results/cache"), help="the cache folder (default results/cache)"
        )
        a.add_argument(
            "studies",
            nargs="*",
            help="study folders, or folders of studies (default: results/); a shard is referenced when a "
            "seal under a study's cells/ lists one of its requests",
        )
        a.set_defaults(cache_run=func)
    prune = actions.choices["prune"]
    prune.add_argument("--delete", action="store_true", help="remove them (without it, only list what would go)")
    prune.add_argument(
        "--min-age-hours",
        type=float,
        default=24.0,
        help="keep shards younger than this (default 24): a running phase's chunks are sealed only when it ends",
    )
