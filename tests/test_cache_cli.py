"""``cotdyn cache ls|prune`` (issue 53 item 6; cotdyn.generation.cache_inventory): what the cache
keeps, which study references each shard, and pruning what none does, never through a link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cotdyn.cli.main import main
from cotdyn.generation.backends.base import Completion
from cotdyn.generation.cache import GenerationCache
from cotdyn.provenance.seal import requests_sha256

REV = "model-rev"
DAY = 86400


def _shard(cache: Path, keys: list[str], revision: str = REV, age_s: float = 2 * DAY) -> Path:
    name = GenerationCache(cache / revision).put({k: [Completion((1, 2), f"text {k}", "stop")] for k in keys})
    path = cache / revision / name
    os.utime(path, (path.stat().st_atime - age_s, path.stat().st_mtime - age_s))
    return path


def _study(root: Path, name: str, keys: list[str]) -> Path:
    study = root / "results" / name
    folder = study / "cells" / "m-gsm8k" / "registered"
    folder.mkdir(parents=True)
    requests = [[k, 1] for k in keys]
    seal = {"file": "samples.parquet", "requests": requests, "requests_sha256": requests_sha256(requests),
            "model_revision": REV, "sha256": "0" * 64}  # fmt: skip
    (folder / "seal.json").write_text(json.dumps(seal))
    return study


@pytest.fixture
def cache_and_studies(tmp_path, monkeypatch):
    """results/cache with three shards: one study "a" reads, one "a" and "b" share, one nobody reads."""
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "results" / "cache"
    shards = {"a": _shard(cache, ["k1", "k2"]), "shared": _shard(cache, ["k3"]), "orphan": _shard(cache, ["k9"])}
    (cache / "notes").mkdir(parents=True)  # a folder of no revision's, no shard in it
    (cache / "notes" / "x.txt").write_text("{}")
    _study(tmp_path, "a", ["k1", "k3"])
    _study(tmp_path, "b", ["k3"])
    return cache, shards


def _run(capsys, *argv) -> str:
    assert main(["cache", *argv]) == 0
    return capsys.readouterr().out


def test_ls_shows_each_shard_its_size_requests_and_the_studies_that_reference_it(cache_and_studies, capsys):
    cache, shards = cache_and_studies
    out = _run(capsys, "ls")
    lines = {name: next(line for line in out.splitlines() if path.name in line) for name, path in shards.items()}
    assert "2 requests" in lines["a"] and lines["a"].endswith("referenced by: results/a")
    assert lines["shared"].endswith("referenced by: results/a, results/b")
    assert lines["orphan"].endswith("referenced by: no study")
    assert f"{shards['orphan'].stat().st_size} B" in lines["orphan"]
    assert "3 shard(s)" in out and "2 studies looked at" in out and "unreferenced: 1 shard(s)" in out
    assert "notes/x.txt  kept (not a shard)" in out
    # given study paths instead of results/: only b's references count
    out = _run(capsys, "ls", "results/b")
    assert "unreferenced: 2 shard(s)" in out


def test_prune_is_a_dry_run_unless_asked_and_removes_only_what_no_study_references(cache_and_studies, capsys):
    cache, shards = cache_and_studies
    out = _run(capsys, "prune")
    assert f"would remove {REV}/{shards['orphan'].name}" in out and "--delete removes them" in out
    assert all(p.exists() for p in shards.values())
    out = _run(capsys, "prune", "--delete")
    assert f"removed {REV}/{shards['orphan'].name}" in out and "removed 1 shard(s)" in out
    assert not shards["orphan"].exists() and shards["a"].exists() and shards["shared"].exists()
    assert (cache / "notes" / "x.txt").exists()
    # with study a gone, its own shard goes; the one b shares stays
    out = _run(capsys, "prune", "--delete", "results/b")
    assert not shards["a"].exists() and shards["shared"].exists()
    # a reopened cache serves what is left
    assert "k3" in GenerationCache(cache / REV, read_only=True) and "k1" not in GenerationCache(
        cache / REV, read_only=True
    )


def test_prune_keeps_recent_shards_and_folders_holding_a_run_in_flight(cache_and_studies, capsys):
    cache, shards = cache_and_studies
    fresh = _shard(cache, ["k10"], age_s=60)
    out = _run(capsys, "prune", "--delete")
    assert fresh.exists() and f"kept {REV}/{fresh.name}" in out and "younger than the minimum age" in out
    assert not shards["orphan"].exists()
    (cache / REV / "host.1.abc.journal").write_bytes(b"")  # a run killed mid-chunk, to be resumed
    out = _run(capsys, "prune", "--delete", "--min-age-hours", "0")
    assert fresh.exists() and "unfinished work" in out and "removed 0 shard(s)" in out


def test_links_are_listed_never_followed_nor_removed(cache_and_studies, tmp_path, capsys):
    cache, shards = cache_and_studies
    outside = tmp_path / "outside"
    outside.mkdir()
    target = _shard(outside, ["k20"])  # a valid shard outside the cache
    (cache / REV / "linked.json").symlink_to(target)
    (cache / "linked-revision").symlink_to(outside / REV, target_is_directory=True)
    out = _run(capsys, "ls")
    assert f"{REV}/linked.json  link (not followed)" in out and "linked-revision  link (not followed)" in out
    assert "k20" not in out and "3 shard(s)" in out
    _run(capsys, "prune", "--delete", "--min-age-hours", "0")
    assert target.exists() and (cache / REV / "linked.json").is_symlink()


def test_damaged_shards_are_named_and_pruned(cache_and_studies, capsys):
    cache, shards = cache_and_studies
    torn = cache / REV / ("0" * 64 + ".json")
    torn.write_text('{"sha256": "x", "body": "{}"}')
    os.utime(torn, (0, 0))
    out = _run(capsys, "ls")
    assert "damaged, ignored by the cache (checksum mismatch)" in out
    _run(capsys, "prune", "--delete")
    assert not torn.exists()


def test_an_unreadable_or_linked_seal_stops_prune_with_one_line_naming_it(cache_and_studies, tmp_path, capsys):
    cache, shards = cache_and_studies
    seal = tmp_path / "results" / "b" / "cells" / "m-gsm8k" / "registered" / "seal.json"
    seal.write_text('{"requests": [["k3", 1]], "requests": []}')  # a key twice
    with pytest.raises(SystemExit) as stop:
        main(["cache", "prune", "--delete"])
    assert str(stop.value).startswith(f"cotdyn cache: {Path('results/b/cells/m-gsm8k/registered/seal.json')}")
    assert "\n" not in str(stop.value) and all(p.exists() for p in shards.values())
    seal.unlink()
    seal.symlink_to(tmp_path / "results" / "a" / "cells" / "m-gsm8k" / "registered" / "seal.json")
    with pytest.raises(SystemExit, match="a link, not followed"):
        main(["cache", "ls"])
    with pytest.raises(SystemExit, match="no generation cache there"):
        main(["cache", "ls", "--cache", str(tmp_path / "nowhere")])
