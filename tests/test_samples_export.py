"""The samples as JSON lines beside the parquet (issue 53 item 6; cotdyn.records.export): the same
rows, deterministic bytes, written by rule samples_jsonl, expected and re-derived by the audit."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from inprocess import ROOT, run_study

from cotdyn.audit.check import MISMATCH, MISSING, audit
from cotdyn.records.export import samples_jsonl, write_samples_jsonl

SAMPLES = "cells/sim-gsm8k/registered/samples.jsonl"


def _table(path: Path) -> Path:
    table = pa.table(
        {
            "problem_id": ["café", "q<2>"],
            "prefix": [0, 1],
            "seed": [2**62 + 3, 7],
            "text": ['<script>alert("x")</script>\n', "naïve \u2028 line"],
            "token_ids": [[1, 2, 3], []],
            "hit_budget": [False, True],
            "answer": ["9", None],
            "score": [0.5, math.nan],
        }
    )
    pq.write_table(table, path)
    return path


def test_each_line_is_its_row_in_order_with_null_for_missing(tmp_path):
    path = _table(tmp_path / "samples.parquet")
    lines = write_samples_jsonl(path, tmp_path / "samples.jsonl").read_bytes()
    rows = [json.loads(line) for line in lines.decode("utf-8").splitlines()]
    expected = pq.read_table(path).to_pylist()
    expected[1]["score"] = None  # NaN has no JSON word: null
    assert rows == expected
    assert list(rows[0]) == ["problem_id", "prefix", "seed", "text", "token_ids", "hit_budget", "answer", "score"]
    assert lines.endswith(b"\n") and lines.count(b"\n") == 2  # the text's own newline is escaped
    assert "café".encode() in lines and b"NaN" not in lines
    assert [line.decode() for line in lines.splitlines()] == lines.decode().splitlines()  # U+2028 escaped


def test_bytes_depend_on_the_rows_alone_not_on_how_the_parquet_was_written(tmp_path):
    one = _table(tmp_path / "one.parquet")
    two = tmp_path / "two.parquet"
    pq.write_table(pq.read_table(one), two, row_group_size=1, compression="gzip")  # other row groups, codec
    assert b"".join(samples_jsonl(one)) == b"".join(samples_jsonl(two))
    write_samples_jsonl(one, tmp_path / "a.jsonl")
    write_samples_jsonl(one, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


TEXTS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['"\\', "\x00\x1f\x7f", "\x85\u2028\u2029", "é😀", "</script>", ""]
)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.none() | st.integers(-(2**63), 2**63 - 1),
            st.none() | st.booleans(),
            st.none() | TEXTS,
            st.none() | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
        ),
        min_size=1,
        max_size=8,
    ),
    null_id=st.booleans(),
)
def test_arrow_written_lines_are_the_bytes_of_the_row_by_row_writer(tmp_path_factory, rows, null_id):
    """The columns Arrow writes at once (integers, booleans, strings, lists of integers) give the
    bytes json gives row by row: nulls, escapes, U+2028, the int64 range; a list holding a null
    falls back to the row writer."""
    from cotdyn.records import export

    ids = [r[3] for r in rows]
    if null_id:
        ids[0] = [*(ids[0] or []), None]
    table = pa.table(
        {
            "seed": pa.array([r[0] for r in rows], pa.int64()),
            "hit_budget": pa.array([r[1] for r in rows], pa.bool_()),
            "text": pa.array([r[2] for r in rows], pa.large_string()),
            "token_ids": pa.array(ids, pa.list_(pa.int64())),
        }
    )
    path = tmp_path_factory.mktemp("lines") / "samples.parquet"
    pq.write_table(table, path)
    fast = b"".join(samples_jsonl(path))
    assert (export._encoded_lines(table.to_batches()[0]) is None) == null_id  # which writer ran
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(export, "_encoded_lines", lambda batch: None)
        assert fast == b"".join(samples_jsonl(path))


@pytest.fixture(scope="module")
def exported_study(tmp_path_factory) -> Path:
    """A one-cell simulated study with a subsample variant, through every rule in process."""
    root = tmp_path_factory.mktemp("exported")
    config = {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(root / "cache"),
        "cells": ["sim-gsm8k"],
        "models": {"sim": {"backend": "simulated"}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(ROOT / "data" / "gsm8k_test.jsonl"), "limit": 12}},
        "variants": {"registered": {}, "fewer": {"subsample_of": "registered", "m": 5}},
        "extras": [],  # the export and its page are on trial, not the extras
    }
    (root / "study.yaml").write_text(yaml.safe_dump(config))
    seconds = run_study(root / "study.yaml", root)
    assert "samples_jsonl" in seconds
    return root / "results" / "t"


@pytest.fixture(scope="module")
def exported_audit(exported_study):
    """The audit of the unaltered study, read by the tests of each file it re-derives."""
    return audit(exported_study)


def test_the_rule_writes_the_parquet_rows_and_the_audit_rederives_them(exported_study, exported_audit):
    stored = pd.read_parquet(exported_study / "cells/sim-gsm8k/registered/samples.parquet")
    rows = [json.loads(line) for line in (exported_study / SAMPLES).read_text().splitlines()]
    assert len(rows) == len(stored) > 0
    assert [r["text"] for r in rows] == stored["text"].tolist()
    assert not (exported_study / "cells/sim-gsm8k/fewer/samples.jsonl").exists()  # it has no samples of its own
    report = exported_audit
    assert report.ok, report.text()
    line = next(f for f in report.files if f.path == SAMPLES)
    assert line.detail == "re-derived"


def test_the_audit_fails_an_edited_or_deleted_export(exported_study, tmp_path):
    study = tmp_path / "results" / "t"
    shutil.copytree(exported_study.parents[1], tmp_path, dirs_exist_ok=True)
    jsonl = study / SAMPLES
    jsonl.write_text(jsonl.read_text().replace('"status":"ok"', '"status":"no_answer"', 1))
    report = audit(study)
    line = next(f for f in report.files if f.path == SAMPLES)
    assert not report.ok and line.status == MISMATCH, line
    jsonl.unlink()
    line = next(f for f in audit(study).files if f.path == SAMPLES)
    assert line.status == MISSING and "samples_jsonl" in line.detail, line


def test_each_variant_has_its_sample_browser_page_and_the_audit_rederives_it(exported_study, exported_audit, tmp_path):
    from cotdyn.report.csp import carries_policy

    for variant in ("registered", "fewer"):
        page = exported_study / f"report/samples/{variant}.html"
        assert carries_policy(page.read_bytes())
        assert "sim-gsm8k" in page.read_text() and "entropy" in page.read_text()
    # the subsample variant shows its own first 5 samples of each prefix, and names the generating variant's file
    assert "samples.jsonl" in (exported_study / "report/samples/fewer.html").read_text()
    assert "cells/sim-gsm8k/registered/samples.jsonl" in (exported_study / "report/samples/fewer.html").read_text()
    report = exported_audit
    line = next(f for f in report.files if f.path == "report/samples/registered.html")
    assert report.ok and line.detail == "re-derived from the stored raw data", (line, report.text())
    study = tmp_path / "results" / "t"
    shutil.copytree(exported_study.parents[1], tmp_path, dirs_exist_ok=True)
    page = study / "report/samples/registered.html"
    page.write_text(page.read_text().replace("</body>", "<p>edited</p></body>", 1))
    line = next(f for f in audit(study).files if f.path == "report/samples/registered.html")
    assert line.status == MISMATCH, line
