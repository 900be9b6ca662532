"""Download GSM8K test and MATH-500 from the Hugging Face hub at the plan's pinned revisions,
write them as JSONL and check them against data/README.md's file hashes and the plan's content hashes.

    python scripts/fetch_data.py --out data/ [--plan preregistration/plan.yaml]

Needs the network (the hub). Writes nothing unless every hash matches.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cotdyn.dataset.benchmarks import content_sha256, problems_from_rows, read_hub  # noqa: E402
from cotdyn.plan.load import load_plan  # noqa: E402

# File name, sha256 as data/ ships it (data/README.md), and whether its JSON escapes non-ASCII
# (the GSM8K file does, as its source repository wrote it; the MATH-500 file does not).
FILES = {
    "gsm8k": ("gsm8k_test.jsonl", "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14", True),
    "math500": ("math500_test.jsonl", "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132", False),
}


def jsonl_bytes(rows: list[dict], ensure_ascii: bool) -> bytes:
    """One JSON object a line, keys in the hub's order."""
    return "".join(json.dumps(row, ensure_ascii=ensure_ascii) + "\n" for row in rows).encode("utf-8")


def fetch(name: str, spec: dict) -> bytes:
    hub = spec["hub"]
    rows = read_hub(hub["repo"], hub.get("config"), hub["split"], hub["revision"])
    found = content_sha256(problems_from_rows(rows, name, f"{hub['repo']}@{hub['revision']}"))
    if found != spec["content_sha256"]:
        raise SystemExit(f"{name}: content sha256 {found} differs from the plan's {spec['content_sha256']}")
    file, pinned, ascii_only = FILES[name]
    data = jsonl_bytes(rows, ascii_only)
    if hashlib.sha256(data).hexdigest() != pinned:
        raise SystemExit(
            f"{name}: {file} would have sha256 {hashlib.sha256(data).hexdigest()}, not {pinned} "
            "(the rows match the plan; only their serialization differs)"
        )
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "data")
    parser.add_argument("--plan", type=Path, default=ROOT / "preregistration" / "plan.yaml")
    args = parser.parse_args()
    benchmarks = load_plan(args.plan)["panel"]["benchmarks"]
    fetched = {name: fetch(name, benchmarks[name]) for name in FILES}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in fetched.items():
        (args.out / FILES[name][0]).write_bytes(data)
        print(f"{name}: {args.out / FILES[name][0]} ({len(data)} bytes, sha256 {FILES[name][1]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
