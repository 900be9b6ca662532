"""The audit of a study folder that attacks its readers (issue 52): a key written twice in the
manifest, a FIFO or a device where a file should be, a sparse 3 GiB file, JSON 200,000 deep, an
alias bomb beside the plan, a file hard-linked from outside, a read-only folder for ``--report``.
Each ends in a named FAIL (the CLI: a non-zero code, no traceback) within seconds; an alarm turns a
hang into a failure. Each case alters a copy of the shared small simulated study
(test_hostile_audit's ``copied_study``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import PLAN
from test_hostile_audit import MANIFEST, copied_study
from test_untrusted_reading import BOMB, DEEP, char_device, fifo

from cotdyn.audit.check import audit

CELL = "cells/sim-gsm8k/registered"
RECORDS = f"{CELL}/records.parquet"


@pytest.fixture
def hostile(small_simulated_study, tmp_path):
    """(a copy of the small simulated study, outside/), as test_hostile_audit's ``folders``."""
    return copied_study(small_simulated_study, tmp_path)


@pytest.fixture(autouse=True)
def no_hang():
    def stop(*_):
        raise TimeoutError("the audit hung: more than 120 s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def cli(*args: str):
    done = subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", "audit", *map(str, args)], capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


def failed(report, *expected: str) -> str:
    text = report.text()
    assert not report.ok, text[:3000]
    for part in expected:
        assert part in text, text[:3000]
    return text


def test_a_manifest_listing_a_file_twice_is_refused_naming_both_lines(hostile):
    """Wrong hash first, right hash last: the old reader kept the last and the audit passed."""
    study, _ = hostile
    lines = (study / MANIFEST).read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if f'"{RECORDS}"' in line)
    lines.insert(at, f'    "{RECORDS}": "{"0" * 64}",\n')
    (study / MANIFEST).write_text("".join(lines))
    failed(audit(study), f"key 'files.{RECORDS}' appears twice (lines {at + 1} and {at + 2})")


@pytest.mark.parametrize("rel", [f"{CELL}/seal.json", "problems/gsm8k.parquet"])
def test_a_fifo_inside_the_study_is_named_and_never_opened(hostile, rel):
    study, _ = hostile
    assert (study / rel).exists()
    fifo(study / rel)
    failed(audit(study), f"{rel} (a FIFO)", "nothing was read")


def test_a_device_at_a_seal_is_named(hostile):
    study, _ = hostile
    (study / CELL / "seal.json").unlink()
    char_device(study / CELL / "seal.json")
    failed(
        audit(study), "seal.json (a character device)" if not (study / CELL / "seal.json").is_symlink() else "symlink"
    )


def test_a_file_hard_linked_from_outside_is_refused(hostile):
    study, outside = hostile
    os.link(outside / "target.txt", study / "cells" / "linked.txt")
    failed(audit(study), "hard-linked from outside the study folder (cells/linked.txt)")


def plan_copy(tmp_path):
    """The plan, REGISTERED and deviations.yaml copied beside the study, named with --plan."""
    folder = tmp_path / "prereg"
    shutil.copytree(PLAN.parent, folder, ignore=shutil.ignore_patterns("v*", "examples"))
    return folder / "plan.yaml"


@pytest.mark.parametrize("name", ["REGISTERED", "deviations.yaml"])
def test_a_fifo_beside_the_plan_is_named(hostile, tmp_path, name):
    study, _ = hostile
    plan = plan_copy(tmp_path)
    fifo(plan.with_name(name))
    failed(audit(study, plan_path=plan), f"{name}: a FIFO, not a regular file")


def test_an_alias_bomb_in_registered_is_named(hostile, tmp_path):
    study, _ = hostile
    plan = plan_copy(tmp_path)
    registered = plan.with_name("REGISTERED")
    registered.write_text(registered.read_text() + BOMB)
    failed(audit(study, plan_path=plan), "REGISTERED: its aliases expand to")


def test_a_deep_seal_summary_and_plan_check_are_named_not_recursed(hostile):
    study, _ = hostile
    for rel in (f"{CELL}/seal.json", f"{CELL}/summary.json", "checks/plan_check.json"):
        assert (study / rel).exists(), rel
        (study / rel).write_text(DEEP)
    text = failed(audit(study), "seal.json: JSON nested 200000 deep")
    assert text.count("JSON nested 200000 deep") >= 3, text[:3000]


def test_sparse_seal_and_summary_past_their_bounds_are_refused_by_size(hostile):
    """Sparse files one byte past their bounds (test_untrusted_reading reads 3 GiB ones; here the
    audit hashes every file first, and hashing 3 GiB twice takes a minute)."""
    from cotdyn.audit.diff import MAX_COMPARED_BYTES
    from cotdyn.provenance.seal import MAX_SEAL_BYTES

    study, _ = hostile
    for rel, size in ((f"{CELL}/seal.json", MAX_SEAL_BYTES + 1), (f"{CELL}/summary.json", MAX_COMPARED_BYTES + 1)):
        with open(study / rel, "wb") as f:
            f.truncate(size)
    text = failed(audit(study), f"seal.json: {MAX_SEAL_BYTES + 1} bytes, more than")
    assert f"summary.json: {MAX_COMPARED_BYTES + 1} bytes, more than" in text, text[:3000]


def test_the_cli_names_a_fifo_without_a_traceback(hostile):
    study, _ = hostile
    fifo(study / CELL / "seal.json")
    code, output = cli(study)
    assert code == 1 and "(a FIFO)" in output and "Traceback" not in output, output[-3000:]


def test_report_into_a_folder_that_cannot_be_written_is_a_named_error(hostile):
    """A read-only study: the report's folder refuses the write (here a file stands where the folder
    would be, which refuses root too), and the CLI names it."""
    study, _ = hostile
    target = study / MANIFEST / "audit.json"  # under a file: no folder can be made there
    code, output = cli(study, "--report", target)
    assert code == 1 and f"error: the report was not written to {target}" in output, output[-3000:]
    assert "Traceback" not in output
    if os.geteuid() != 0:  # permissions bind only a user who is not root
        os.chmod(study / "report", 0o555)
        code, output = cli(study, "--report", study / "report" / "audit.json")
        os.chmod(study / "report", 0o755)
        assert code == 1 and "error: the report was not written" in output and "Traceback" not in output
