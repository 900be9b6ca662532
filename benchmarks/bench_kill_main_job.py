"""The README's main job killed at random moments and resumed each time (issue 53's acceptance).

    python benchmarks/bench_kill_main_job.py CHECKOUT [--kills 5] [--seed 53] [--reference OTHER]

Runs ``snakemake --cores 2`` in CHECKOUT (a clone; its ``results/`` is written), kills its whole
process group (``kill -9``) at a moment drawn uniformly from 20 to 300 s after each start, resumes
it as the README says (``snakemake --unlock``, then ``--rerun-incomplete``), and after the last kill
lets it finish. At each kill it prints which generation job was running and the decoding the kill
lost: the seconds since the later of the last write to the generation cache (a shard, a journal
line or a snapshot) and the first decode step the job's log showed (its progress bar's token count
above 0, polled every 0.2 s; the bar prints at most once a second, so this can come up to a second
and a step after the true first step). A kill before the job's first decode step (model loading,
the prefill) loses no decoding; the seconds since the job started are printed for it. With
``--reference``, the checkout of an uninterrupted run of the same config, it compares the cache's
shards and every file of ``results/default`` byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

GENERATION_SCRIPTS = ("reference.py", "continuations.py")


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def generation_processes(session: int) -> list[tuple[int, str, float]]:
    """(pid, script, start time) of the generation jobs running in ``session``."""
    found = []
    ticks = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) != session:  # field 6 of stat: the session id
            continue
        for script in GENERATION_SCRIPTS:
            if script in cmdline and "snakemake " not in cmdline:
                found.append((int(proc.name), script, _boot_time() + int(fields[19]) / ticks))
    return found


def last_cache_write(checkout: Path) -> float:
    return max((p.stat().st_mtime for p in (checkout / "results" / "cache").glob("*/*")), default=0.0)


def tokens_drawn(checkout: Path, script: str) -> int:
    """The token count the newest log of ``script``'s rule shows last (0 before its first decode step)."""
    logs = sorted(
        (checkout / "results" / "default" / "logs" / script.removesuffix(".py")).rglob("*.log"),
        key=lambda p: p.stat().st_mtime,
    )
    if not logs:
        return 0
    with open(logs[-1], "rb") as f:
        f.seek(max(0, logs[-1].stat().st_size - 2000))
        found = re.findall(rb"tokens drawn: (\d+)tok", f.read())
    return int(found[-1]) if found else 0


def run_until(checkout: Path, command: list[str], kill_after: float | None, log) -> dict | None:
    """Run ``command``; kill its process group ``kill_after`` s in (None: let it end). What the kill found."""
    process = subprocess.Popen(command, cwd=checkout, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    began = time.time()
    # a generation process's bar prints 0 tokens when it is made, then its count at most once a
    # second: decoding began when the count the log shows last rose from 0 (a count above 0 seen
    # first is a killed run's, in a log the rerun appends to)
    zero: set[int] = set()
    decoding: dict[int, float] = {}  # generation process -> when its log first showed a token drawn
    while process.poll() is None:
        running = generation_processes(process.pid)
        for pid, script, _ in running:
            if pid not in decoding:
                drawn = tokens_drawn(checkout, script)
                if drawn == 0:
                    zero.add(pid)
                elif pid in zero:
                    decoding[pid] = time.time()
        if kill_after is not None and time.time() - began >= kill_after:
            written = last_cache_write(checkout)
            os.killpg(process.pid, signal.SIGKILL)
            killed = time.time()
            process.wait()
            if not running:
                return {"at": killed - began, "job": None, "lost": 0.0}
            pid, script, started = running[0]
            if pid not in decoding and written < started:
                return {"at": killed - began, "job": f"{script} before its first decode step", "lost": 0.0}
            return {"at": killed - began, "job": script, "lost": killed - max(written, decoding.get(pid, started))}
        time.sleep(0.2)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} ended with {process.returncode} (log: {log.name})")
    return None


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument("--reference", type=Path, help="the checkout of an uninterrupted run")
    options = parser.parse_args()
    checkout, rng = options.checkout.resolve(), random.Random(options.seed)
    first = ["snakemake", "--cores", "2"]
    resume = ["snakemake", "--cores", "2", "--rerun-incomplete"]
    started = time.time()
    with open(checkout / "kill_main_job.log", "a") as log:
        kills = 0
        command = first
        while kills < options.kills:
            kill_after = rng.uniform(20, 300)
            found = run_until(checkout, command, kill_after, log)
            if found is None:
                print(f"the job ended before kill {kills + 1} ({kill_after:.0f} s in)")
                break
            kills += 1
            job = found["job"] or "no generation job"
            print(f"kill {kills}: {found['at']:.0f} s into this start, {job}; generation lost <= {found['lost']:.1f} s")
            subprocess.run(["snakemake", "--unlock"], cwd=checkout, stdout=log, stderr=subprocess.STDOUT, check=True)
            command = resume
        run_until(checkout, command, None, log)
    print(f"finished after {kills} kills, {time.time() - started:.0f} s in all")
    if options.reference:
        ours = digests(checkout / "results" / "cache")
        theirs = digests(options.reference.resolve() / "results" / "cache")
        print(f"cache shards byte-identical: {ours == theirs} ({len(ours)} files against {len(theirs)})")
        ours = digests(checkout / "results" / "default")
        theirs = digests(options.reference.resolve() / "results" / "default")
        differ = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        print(f"results/default: {len(ours)} files, {len(differ)} differ: {differ[:20]}")


if __name__ == "__main__":
    main()
