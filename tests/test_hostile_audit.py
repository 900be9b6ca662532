"""A study folder from someone else (issue 34): each attack on the audit gets a named FAIL, and
nothing outside the folder changes. Each case copies the shared small simulated study
(conftest's ``small_simulated_study``) to ``review/results/t`` beside a folder ``outside/`` the
attack aims at, alters the copy, audits it, and compares ``outside/`` byte for byte and mtime for
mtime with what it was."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import PLAN

from cotdyn.audit.check import audit, write_report
from cotdyn.files.writers import write_json
from cotdyn.provenance.manifests import config_sha256

MANIFEST = "manifest/manifest.json"
SAMPLES = "cells/sim-gsm8k/registered/samples.parquet"


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}  # fmt: skip


@pytest.fixture
def folders(small_simulated_study, tmp_path):
    return copied_study(small_simulated_study, tmp_path)


def copied_study(small_simulated_study, tmp_path):
    """(the study copy, outside/): outside holds a summary.json, a plan, and a cache copy with an
    old temporary file that a cleanup would delete (also test_hostile_reading's)."""
    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    study = tmp_path / "review" / "results" / "t"
    shutil.copytree(small_simulated_study.root / "results" / "t", study, symlinks=True)
    outside = tmp_path / "outside"
    shutil.copytree(small_simulated_study.root / "cache", outside / "cache")
    (outside / "summary.json").write_text('{"kept": true}\n')
    (outside / "target.txt").write_text("outside, not to be overwritten\n")
    shutil.copy(PLAN, outside / "plan.yaml")
    for folder in (outside / "cache").iterdir():
        old = folder / "host.1.abc.tmp"
        old.write_text("a write in flight elsewhere")
        os.utime(old, (time.time() - 7200, time.time() - 7200))
    return study, outside


def edit_config(study: Path, change) -> None:
    manifest = json.loads((study / MANIFEST).read_text())
    change(manifest["config"])
    manifest["config_sha256"] = config_sha256(manifest["config"])
    (study / MANIFEST).write_text(json.dumps(manifest))


def samples_with(study: Path, change) -> None:
    table = pd.read_parquet(study / SAMPLES)
    change(table)
    table.to_parquet(study / SAMPLES, index=False)


def link(study: Path, rel: str, target: Path) -> None:
    (study / rel).parent.mkdir(parents=True, exist_ok=True)
    (study / rel).unlink(missing_ok=True)
    (study / rel).symlink_to(target)


def bomb(study: Path, outside: Path) -> None:
    table = pd.read_parquet(study / SAMPLES)
    table.loc[0, "text"] = "a" * 200_000_000
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), study / SAMPLES, compression="zstd")
    assert (study / SAMPLES).stat().st_size < 2_000_000


def python_tag_plan(study: Path, outside: Path) -> None:
    plan = study.parents[1] / "preregistration" / "plan.yaml"
    plan.parent.mkdir()
    plan.write_text("protocol: !!python/object/apply:os.system ['echo ran']\n")
    edit_config(study, lambda c: c.update(plan=str(plan)))


def escaping_variant(c: dict) -> None:
    c["variants"]["../../../../outside"] = {"subsample_of": "registered"}


# (name, alteration of (study, outside), what the FAIL must say)
CASES = [
    ("a ../ variant name", lambda s, o: edit_config(s, escaping_variant), "field variants"),
    ("a trailing-newline name", lambda s, o: edit_config(s, lambda c: c.update(study="t\n")), "field study"),
    ("a 300-character name", lambda s, o: edit_config(s, lambda c: c.update(study="a" * 300)), "expected maxLength: 100"),
    ("an absolute plan outside", lambda s, o: edit_config(s, lambda c: c.update(plan=str(o / "plan.yaml"))),
     "lies outside"),
    ("a ../ plan outside", lambda s, o: edit_config(s, lambda c: c.update(plan="../outside/plan.yaml")),
     "lies outside"),
    ("a plan with a python tag", python_tag_plan, "an explicit tag (tag:yaml.org,2002:python"),
    ("a manifest that is not JSON", lambda s, o: (s / MANIFEST).write_text("{not json"), "not a JSON manifest"),
    ("a manifest without config", lambda s, o: (s / MANIFEST).write_text('{"files": {}}'), "field config"),
    ("a manifest that is a list", lambda s, o: (s / MANIFEST).write_text("[]"), "expected a JSON object"),
    ("NaN in the config", lambda s, o: (s / MANIFEST).write_text(
        (s / MANIFEST).read_text().replace('"protocol": {}', '"protocol": {"epsilon": NaN}')), "NaN"),
    ("a link at report/audit.json.tmp", lambda s, o: link(s, "report/audit.json.tmp", o / "target.txt"), "symlink"),
    ("a link at logs/audit/audit.json.tmp",
     lambda s, o: link(s, "logs/audit/audit.json.tmp", o / "target.txt"), "symlink"),
    ("a link at report/registered/x.html.tmp",
     lambda s, o: link(s, "report/registered/x.html.tmp", o / "target.txt"), "symlink"),
    ("samples linked to an outside file", lambda s, o: link(s, SAMPLES, o / "target.txt"), "nothing was read"),
    ("garbage parquet", lambda s, o: (s / SAMPLES).write_bytes(b"PAR1 garbage bytes PAR1"), "not a parquet file"),
    ("samples without text", lambda s, o: samples_with(s, lambda t: t.drop(columns="text", inplace=True)),
     "has no column text"),
    ("a 1 MB text", lambda s, o: samples_with(s, lambda t: t.__setitem__("text", ["x" * 1_000_000] + list(t.text[1:]))),
     "a text of 1000000 characters"),
    ("a decompression bomb", bomb, "decompresses"),
]  # fmt: skip


@pytest.mark.parametrize("name,alter,expected", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_study_fails_named_and_nothing_outside_changes(folders, name, alter, expected):
    study, outside = folders
    before = snapshot(outside)
    alter(study, outside)
    started = time.time()
    report = audit(study)
    assert not report.ok and expected in report.text(), report.text()[:3000]
    assert time.time() - started < 60
    # the audit's own reports, where the rules write them, never go through a link
    for rel in ("logs/audit/audit.json", "report/audit.json"):
        try:
            write_report(report, study / rel, within=study)
        except OSError as e:
            assert "symlink" in str(e)
    assert snapshot(outside) == before


def test_a_cache_named_outside_is_not_opened_and_its_temporaries_survive(folders):
    study, outside = folders
    before = snapshot(outside)
    edit_config(study, lambda c: c.update(cache=str(outside / "cache")))
    report = audit(study)
    assert "generation cache" in report.text() and "lies outside" in report.text()
    assert snapshot(outside) == before  # the hour-old *.tmp is still there, byte for byte


def test_a_cache_the_reviewer_names_is_read_only(folders):
    study, outside = folders
    before = snapshot(outside)
    report = audit(study, cache=outside / "cache")
    assert report.ok, report.text()[:3000]
    assert "every row equal to the generation cache" in report.text()
    assert snapshot(outside) == before


def test_control_characters_in_file_names_are_escaped(folders):
    study, _ = folders
    (study / "cells" / "evil\x1b[2J\x1b[1A").write_text("x")
    text = audit(study).text()
    assert "\x1b" not in text and "evil\\x1b[2J" in text


def test_an_untouched_study_audits_pass_and_leaves_every_byte(small_simulated_study, folders):
    study, outside = folders
    cache = small_simulated_study.root / "cache"
    before, cache_before = snapshot(study), snapshot(cache)
    first, second = audit(study, cache=cache), audit(study, cache=cache)
    assert first.ok, first.text()[:3000]
    assert json.dumps(first.as_dict()) == json.dumps(second.as_dict())
    original = audit(small_simulated_study.root / "results" / "t")
    assert original.ok and [f for f in original.files] == [f for f in first.files]
    assert snapshot(study) == before and snapshot(cache) == cache_before
    write_json(first.as_dict(), study / "logs/audit/audit.json", within=study)


@pytest.mark.parametrize(
    "name,value",
    [("MAX_FILE_BYTES", 100), ("MAX_ROWS", 2), ("MAX_UNCOMPRESSED_BYTES", 1000), ("MAX_RATIO", 2),
     ("MAX_TEXT_CHARS", 10)],
)  # fmt: skip
def test_each_bound_is_named_in_its_refusal(tmp_path, monkeypatch, name, value):
    """Each bound of cotdyn.audit.bounds, set low, refuses a small raw file naming itself and its value."""
    from cotdyn.audit import bounds

    monkeypatch.setattr(bounds, name, value)
    path = tmp_path / "samples.parquet"
    table = pd.DataFrame({"text": ["a" * 5000, "b", "c"]})
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path, compression="zstd")
    problem = bounds.raw_file_problem(path) or bounds.long_text(table, "samples.parquet")
    assert problem and f"{name} = {value} in cotdyn.audit.bounds" in problem, problem
