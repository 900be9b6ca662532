"""One admission (issue 52 item 5): the audit lists the study folder once, in its admission, and every
later step reads that walk; each raw file's bytes are hashed by the audit once for its manifest
and seal checks; each model's cache folder is read a shard at a time while its raw files are compared."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from test_audit import build_study

import cotdyn.audit.bounds as bounds
import cotdyn.audit.untrusted as untrusted
from cotdyn.audit.check import audit


@pytest.fixture(scope="module")
def registered_study(tmp_path_factory, data_dir) -> Path:
    return build_study(tmp_path_factory.mktemp("admission"), data_dir, {}, [], extras=False)


def test_the_audit_lists_each_folder_of_the_study_once(registered_study, monkeypatch):
    listed = Counter()
    real = os.scandir

    def counting(path="."):
        if isinstance(path, (str, os.PathLike)) and Path(path).resolve().is_relative_to(registered_study.resolve()):
            listed[Path(path).resolve().relative_to(registered_study.resolve()).as_posix()] += 1
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    report = audit(registered_study)
    assert report.ok, report.text()
    folders = {rel.rsplit("/", 1)[0] if "/" in rel else "." for rel in (f.path for f in report.files)}
    assert folders <= set(listed), "the count saw the folders the audit checked"
    assert {rel: n for rel, n in listed.items() if n != 1} == {}, "a folder listed more than once"


def test_the_audit_hashes_each_raw_file_once_for_its_manifest_and_seal_checks(registered_study, monkeypatch):
    import cotdyn.provenance.manifests as manifests

    hashed, study = Counter(), registered_study.resolve()
    for module in (manifests, untrusted, bounds):  # the manifest comparison's hashes and the seal check's
        real = getattr(module, "file_sha256", manifests.file_sha256)

        def counting(path, real=real):
            if Path(path).resolve().is_relative_to(study):
                hashed[Path(path).resolve().relative_to(study).as_posix()] += 1
            return real(path)

        monkeypatch.setattr(module, "file_sha256", counting, raising=False)
    report = audit(registered_study)
    assert report.ok, report.text()
    raw = [p for p in hashed if p.endswith(("/samples.parquet", "/chains.parquet"))]
    assert len(raw) == 2 and {p: n for p, n in hashed.items() if n != 1} == {}, hashed


def test_a_file_gone_after_the_walk_is_named_missing(registered_study, tmp_path):
    from test_audit import copy_study

    copy = copy_study(registered_study, tmp_path)
    admitted = untrusted.admit(copy)
    (copy / "analysis" / "registered" / "hypotheses.json").unlink()
    hashes = untrusted.stored_hashes(copy, admitted.entries)
    assert "analysis/registered/hypotheses.json" not in hashes and "checks/plan_check.json" in hashes


def test_the_cache_is_read_a_shard_at_a_time_in_model_order(registered_study, monkeypatch):
    import cotdyn.audit.cache_rows as cache_rows
    import cotdyn.audit.raw as raw
    import cotdyn.generation.cache as cache

    read = []

    def counting(shard, real=cache_rows.shard_samples):
        read.append(Path(shard))
        return real(shard)

    monkeypatch.setattr(cache_rows, "shard_samples", counting)
    monkeypatch.setattr(cache.GenerationCache, "__init__", lambda *a, **k: pytest.fail("a cache loaded whole"))
    report = audit(registered_study)
    assert report.ok, report.text()
    assert "every row equal to the generation cache" in report.text(), "the rows were compared with the cache"
    assert read and len(read) == len(set(read)), f"each shard read once: {read}"
    folders = [p.parent for p in read]
    assert folders == sorted(folders, key=folders.index), "one folder's shards read together, then let go"
    raw_files = {
        "cells/z-gsm8k/x": ("z-gsm8k", "v", None),
        "cells/a-m/x": ("a-m", "v", None),
        "cells/b/x": ("b", "v", None),
    }
    ordered = [p for p, _ in raw.by_model(raw_files, {"z-gsm8k": "m1", "a-m": "m2", "b": "m1"})]
    assert ordered == ["cells/b/x", "cells/z-gsm8k/x", "cells/a-m/x"]


def test_the_raw_check_hashes_no_raw_file_again(registered_study, monkeypatch):
    import cotdyn.provenance.seal as seal

    study = registered_study.resolve()

    def refusing(path, real=seal.file_sha256):
        assert not Path(path).resolve().is_relative_to(study), f"{path} hashed again for its seal"
        return real(path)

    monkeypatch.setattr(seal, "file_sha256", refusing)
    report = audit(registered_study)
    assert report.ok, report.text()


def test_a_rewritten_seed_and_answer_are_named_in_one_report(registered_study, tmp_path):
    """A samples file with a seed and an answer rewritten: a seed problem, a failed seal and an answer
    problem, each named."""
    import pandas as pd
    from test_audit import copy_study

    copy = copy_study(registered_study, tmp_path)
    samples = next(copy.glob("cells/*/registered/samples.parquet"))
    table = pd.read_parquet(samples)
    table.loc[0, "seed"] = int(table.loc[0, "seed"]) + 1
    table.loc[1, "answer"] = "123456789"
    table.to_parquet(samples, index=False)
    report = audit(copy)
    text = report.text()
    assert not report.ok
    assert "seeds are not this registration's" in text and "differ from the answers extracted" in text, text
    raw = [f for f in report.files if f.path == samples.relative_to(copy).as_posix()]
    assert raw and raw[0].status == "mismatch" and "seal" in raw[0].detail, raw


@pytest.mark.parametrize("swapped", ["samples.parquet", "seal.json"])
def test_a_raw_table_or_seal_swapped_after_the_admission_is_refused_by_name(
    registered_study, tmp_path, monkeypatch, swapped
):
    """Everything after the admission reads the raw tables and their seals through the study's view
    (cotdyn.audit.view): one replaced once the folder was walked, hashed and bounded (here, by an
    attacker racing the audit) is not read, and the audit fails naming it."""
    import shutil

    from test_audit import SAMPLES, copy_study

    import cotdyn.audit.check as check

    copy = copy_study(registered_study, tmp_path)
    target = str(Path(SAMPLES).with_name(swapped))
    real = check.study_view

    def then_swapped(root, entries, raw):
        view = real(root, entries, raw)
        shutil.copy(copy / target, tmp_path / "swap")
        os.replace(tmp_path / "swap", copy / target)  # the same bytes, another file
        return view

    monkeypatch.setattr(check, "study_view", then_swapped)
    report = audit(copy)
    assert not report.ok
    assert f"{target}: changed since the audit admitted" in report.text(), report.text()


def test_the_view_reads_only_files_its_walk_found(registered_study):
    from test_audit import SAMPLES

    from cotdyn.audit.view import study_view
    from cotdyn.files.strict import UntrustedFileError

    admitted = untrusted.admit(registered_study)
    view = study_view(registered_study, admitted.entries, [SAMPLES])
    assert view.holds(SAMPLES) and len(view.table(SAMPLES)) > 0
    assert "token_ids" not in view.table(SAMPLES, ids=False).columns
    for rel in ("cells/no-such/samples.parquet", "cells", "../outside.parquet"):
        assert not view.holds(rel)
        with pytest.raises(UntrustedFileError, match="not a file the audit's admission found"):
            view.table(rel)


@pytest.mark.parametrize("chosen, pool", [(None, "jemalloc"), ("system", "system")])
def test_the_cotdyn_command_returns_freed_arrow_memory(chosen, pool):
    """pyarrow's jemalloc pool (cotdyn.files.arrow_memory), chosen before pyarrow loads by the
    cotdyn command; a pool the user chose stays."""
    import subprocess
    import sys

    from cotdyn.files.arrow_memory import VARIABLE

    environ = {k: v for k, v in os.environ.items() if k != VARIABLE} | ({VARIABLE: chosen} if chosen else {})
    backend = "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    # the command's own process, which imports cotdyn.cli first
    script = "import cotdyn.cli; " + backend
    found = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == pool, found.stderr
    if chosen is None:  # pyarrow's own default (mimalloc on these wheels) where nothing chose: not this pool
        plain = subprocess.run([sys.executable, "-c", backend], env=environ, capture_output=True, text=True, check=True)
        assert plain.stdout.strip() != pool
