"""One admission (issue 52 item 5): the audit lists the study folder once, in its admission, and every
later step reads that walk; each raw file's bytes are hashed by the audit once for its manifest
and seal checks; each model's cache folder is held only while its raw files are compared."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from test_audit import build_study

import cotdyn.audit.bounds as bounds
import cotdyn.audit.untrusted as untrusted
from cotdyn.audit.check import audit
from cotdyn.audit.raw import OneFolder, by_model


@pytest.fixture(scope="module")
def registered_study(tmp_path_factory, data_dir) -> Path:
    return build_study(tmp_path_factory.mktemp("admission"), data_dir, {}, [])


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


def test_one_cache_folder_is_held_at_a_time_in_model_order():
    opened = OneFolder()
    opened["a"], opened["b"] = 1, 2
    assert opened == {"b": 2}
    raw = {"cells/z-gsm8k/x": ("z-gsm8k", "v", None), "cells/a-m/x": ("a-m", "v", None), "cells/b/x": ("b", "v", None)}
    ordered = [p for p, _ in by_model(raw, {"z-gsm8k": "m1", "a-m": "m2", "b": "m1"})]
    assert ordered == ["cells/b/x", "cells/z-gsm8k/x", "cells/a-m/x"]
