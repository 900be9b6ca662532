"""One reading per file (issue 48 item 3) and bounded reads (issue 52): every YAML and JSON the
workflow and the audit read goes through cotdyn.files.strict, which refuses a key written twice
(naming the file, the key and both lines), a FIFO, a device or a socket (named, never opened), a
file over its byte bound, JSON nested too deep and a YAML alias bomb. Each case ends in a named
error within seconds: an alarm turns a hang into a failure instead of a stuck suite."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from conftest import PLAN

from cotdyn.files.strict import UntrustedFileError, read_json, read_yaml
from cotdyn.plan.load import load_plan
from cotdyn.plan.registration import PreregistrationError, load_deviations, read_registered

DEEP = "[" * 200_000 + "]" * 200_000
# nine lists of nine aliases to the list before: 9^8 nodes from some 300 bytes
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh")
)
REGISTERED = "plan_sha256: {sha}\ndate: '2026-12-06'\n"


@pytest.fixture(autouse=True)
def no_hang():
    """A read that blocks (a FIFO opened for reading waits for a writer) fails the test instead."""

    def stop(*_):
        raise TimeoutError("the read hung: more than 60 s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def line_of(text: str, start: str, after: int = 0) -> int:
    """The 1-based number of the first line after line ``after`` that starts with ``start``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if i > after and line.startswith(start))


def fifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def char_device(path: Path) -> Path:
    """/dev/null's device node at ``path`` (needs CAP_MKNOD), else a link to /dev/zero."""
    try:
        os.mknod(path, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        path.symlink_to("/dev/zero")
    return path


# --- a key written twice ------------------------------------------------------------------------


def test_a_plan_with_holm_twice_is_refused_naming_the_key_and_both_lines(tmp_path):
    """The finding: holm written twice, alpha 0.05 then 0.5; the analysis took 0.5, a person reads 0.05."""
    text = PLAN.read_text() + "holm:\n  alpha: 0.5\n  family: []\n"
    (plan := tmp_path / "plan.yaml").write_text(text)
    first, second = line_of(text, "holm:"), line_of(text, "holm:", line_of(text, "holm:"))
    with pytest.raises(ValueError, match=rf"plan.yaml: key 'holm' appears twice \(lines {first} and {second}\)"):
        load_plan(plan)


def test_a_nested_key_twice_is_named_by_its_dotted_path(tmp_path):
    text = PLAN.read_text().replace("  alpha: 0.05\n", "  alpha: 0.05\n  alpha: 0.5\n", 1)
    (plan := tmp_path / "plan.yaml").write_text(text)
    first = line_of(text, "  alpha: 0.05")
    with pytest.raises(ValueError, match=rf"key 'holm.alpha' appears twice \(lines {first} and {first + 1}\)"):
        load_plan(plan)


def test_registered_and_deviations_with_a_key_twice_are_refused(tmp_path):
    (registered := tmp_path / "REGISTERED").write_text(REGISTERED.format(sha="a" * 64) + f"plan_sha256: {'b' * 64}\n")
    with pytest.raises(PreregistrationError, match=r"REGISTERED: key 'plan_sha256' appears twice \(lines 1 and 3\)"):
        read_registered(registered)
    deviation = "- cell: '*'\n  parameter: m\n  registered: 4\n  used: 8\n  used: 4\n  reason: r\n"
    (deviations := tmp_path / "deviations.yaml").write_text(deviation)
    with pytest.raises(
        PreregistrationError, match=r"deviations.yaml: key '\[0\].used' appears twice \(lines 4 and 5\)"
    ):
        load_deviations(deviations)


def test_keys_equal_once_constructed_count_as_one_key(tmp_path):
    """``0x1`` and ``1`` are the same key once read: a reader would keep only the last."""
    (path := tmp_path / "c.yaml").write_text("seeds:\n  0x1: a\n  1: b\n")
    with pytest.raises(UntrustedFileError, match=r"key 'seeds.1' appears twice \(lines 2 and 3\)"):
        read_yaml(path)


def test_a_json_key_twice_is_named_with_its_path_and_both_lines(tmp_path):
    files = '{"files": {\n "cells/c/records.parquet": "wrong",\n "cells/c/records.parquet": "right"\n}}'
    (path := tmp_path / "manifest.json").write_text(files)
    with pytest.raises(
        UntrustedFileError, match=r"key 'files.cells/c/records.parquet' appears twice \(lines 2 and 3\)"
    ):
        read_json(path, max_bytes=1000)
    (path := tmp_path / "list.json").write_text('[{"a": 1}, {"b": {"c": 1,\n"c": 2}}]')
    with pytest.raises(UntrustedFileError, match=r"key '\[1\].b.c' appears twice \(lines 1 and 2\)"):
        read_json(path, max_bytes=1000)


def test_what_cotdyn_writes_reads_back(tmp_path):
    """The strict readers take every file the repository ships and every file the writers write."""
    from cotdyn.files.writers import write_json

    for path in [*Path(PLAN).parent.rglob("*.yaml"), *Path(PLAN).parents[1].joinpath("config").rglob("*.yaml")]:
        read_yaml(path)
    for path in Path(PLAN).parent.rglob("REGISTERED"):
        read_registered(path)
    data = {"a": [1, {"b": 'x [ { " \\\\'}], "c": None}
    assert read_json(write_json(data, tmp_path / "x.json"), max_bytes=1000) == data


# --- what a reader does not open ----------------------------------------------------------------


def test_a_fifo_at_registered_or_deviations_is_named_not_opened(tmp_path):
    with pytest.raises(PreregistrationError, match="REGISTERED: a FIFO, not a regular file"):
        read_registered(fifo(tmp_path / "REGISTERED"))
    with pytest.raises(PreregistrationError, match="deviations.yaml: a FIFO, not a regular file"):
        load_deviations(fifo(tmp_path / "deviations.yaml"))


def test_a_device_at_deviations_or_a_seal_is_named_not_read(tmp_path):
    from cotdyn.provenance.seal import SealError, read_seal

    with pytest.raises(PreregistrationError, match="deviations.yaml: a character device"):
        load_deviations(char_device(tmp_path / "deviations.yaml"))
    (tmp_path / "cell").mkdir()
    char_device(tmp_path / "cell" / "seal.json")
    with pytest.raises(SealError, match="seal.json: a character device"):
        read_seal(tmp_path / "cell" / "samples.parquet")


def test_a_fifo_at_a_seal_is_named(tmp_path):
    from cotdyn.provenance.seal import SealError, check_sealed

    (raw := tmp_path / "samples.parquet").write_bytes(b"PAR1")
    fifo(tmp_path / "seal.json")
    with pytest.raises(SealError, match="seal.json: a FIFO, not a regular file"):
        check_sealed(raw)


def test_a_link_out_of_a_root_is_not_followed(tmp_path):
    (tmp_path / "outside.json").write_text("{}")
    (root := tmp_path / "root").mkdir()
    (root / "x.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(UntrustedFileError, match="resolves outside"):
        read_json(root / "x.json", max_bytes=100, root=root)


# --- bounds ---------------------------------------------------------------------------------------


def test_an_alias_bomb_in_registered_is_refused_at_once(tmp_path):
    (registered := tmp_path / "REGISTERED").write_text(REGISTERED.format(sha="a" * 64) + BOMB)
    with pytest.raises(PreregistrationError, match=r"REGISTERED: its aliases expand to \d+ more nodes.*an alias bomb"):
        read_registered(registered)
    (recursive := tmp_path / "r.yaml").write_text("a: &a [1, *a]\n")
    with pytest.raises(UntrustedFileError, match="a recursive alias"):
        read_yaml(recursive)


def test_a_sparse_3_gib_seal_or_summary_is_refused_by_its_size(tmp_path):
    from cotdyn.audit.diff import changed_rows
    from cotdyn.provenance.seal import SealError, read_seal, unreadable_tables

    cell = tmp_path / "cells" / "c" / "registered"
    cell.mkdir(parents=True)
    for name in ("seal.json", "summary.json"):
        with open(cell / name, "wb") as f:
            f.truncate(3 << 30)  # sparse: no disk, but 3 GiB to whoever reads it whole
    with pytest.raises(SealError, match=r"seal.json: 3221225472 bytes, more than"):
        read_seal(cell / "samples.parquet")
    (derived := tmp_path / "summary.json").write_text("{}")
    assert "3221225472 bytes, more than" in changed_rows(cell / "summary.json", derived)
    assert "3221225472 bytes, more than" in unreadable_tables(tmp_path)[0][1]


@pytest.mark.parametrize("name", ["seal.json", "summary.json", "plan_check.json"])
def test_200000_deep_json_is_refused_by_its_depth(tmp_path, name):
    from cotdyn.audit.derive import derive_analysis
    from cotdyn.audit.diff import changed_rows
    from cotdyn.provenance.seal import SealError, read_seal

    (path := tmp_path / name).write_text(DEEP)
    (derived := tmp_path / "derived.json").write_text("{}")
    if name == "seal.json":
        with pytest.raises(SealError, match="JSON nested 200000 deep, more than the 64"):
            read_seal(tmp_path / "chains.parquet")
    else:
        assert "JSON nested 200000 deep" in changed_rows(path, derived)  # the stored file of a mismatch
    if name == "plan_check.json":
        with pytest.raises(UntrustedFileError, match="JSON nested 200000 deep"):
            derive_analysis([], PLAN, path, tmp_path / "out")


def test_a_deep_cache_shard_is_ignored_by_name_here_and_in_a_rerun(tmp_path):
    """The shard that killed the run with a RecursionError (and the rerun, the same way, unnamed)."""
    from cotdyn.generation.cache import GenerationCache

    (tmp_path / "deep.json").write_text(DEEP)
    for read_only in (True, False):  # the audit's view, then a run's
        cache = GenerationCache(tmp_path, read_only=read_only)
        assert cache.rejected and "deep.json" in cache.rejected[0] and "nested 200000 deep" in cache.rejected[0]


def test_a_dictionary_bomb_is_refused_by_its_decoded_size(tmp_path):
    """One 150,000-character text in 400,000 rows: a small file, 60 GB once decoded; refused from
    its dictionary and indices before any row is decoded."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cotdyn.audit.bounds import raw_file_problem

    rng = np.random.default_rng(0)
    text = "".join(map(chr, rng.integers(97, 123, 150_000)))  # incompressible enough to pass the ratio
    indices = pa.array(np.zeros(400_000, dtype=np.int32))
    pq.write_table(
        pa.table({"text": pa.DictionaryArray.from_arrays(indices, pa.array([text]))}), path := tmp_path / "s.parquet"
    )
    assert path.stat().st_size < 20_000_000
    problem = raw_file_problem(path)
    assert problem and "decodes to 60000000000 bytes" in problem and "MAX_DECODED_BYTES" in problem, problem
    from cotdyn.audit.derive import read_problems  # a stored problems table, bounded the same way

    with pytest.raises(UntrustedFileError, match="decodes to 60000000000 bytes"):
        read_problems(path)


# --- where the workflow reads them ------------------------------------------------------------


@pytest.mark.slow  # starts Snakemake
def test_a_config_with_a_key_twice_stops_a_dry_run(tmp_path):
    """Snakemake reads the config itself and keeps the last value; common.smk reads it again strictly."""
    from test_workflow import _simulated_config, _write, snakemake

    config = _write(tmp_path, _simulated_config(tmp_path))
    text = config.read_text() + "study: other\n"
    config.write_text(text)
    result = snakemake("-n", "--configfile", str(config), cwd=tmp_path)
    first, second = line_of(text, "study:"), line_of(text, "study:", line_of(text, "study:"))
    assert result.returncode != 0
    assert f"study.yaml: key 'study' appears twice (lines {first} and {second})" in result.output, result.output[-2000:]
    assert "Traceback" not in result.output


def test_cotdyn_register_refuses_a_plan_with_a_key_twice(tmp_path, capsys):
    from cotdyn.cli.main import main

    text = PLAN.read_text() + "holm:\n  alpha: 0.5\n"
    (plan := tmp_path / "plan.yaml").write_text(text)
    code = main(["register", "--plan", str(plan), "--registered", str(tmp_path / "REGISTERED"), "--date", "2026-12-06"])
    err = capsys.readouterr().err
    assert code != 0 and "key 'holm' appears twice" in err, err[-2000:]
    assert "Traceback" not in err and not (tmp_path / "REGISTERED").exists()


def test_a_json_written_by_the_writers_is_json(tmp_path):
    """The depth scan and json agree on what cotdyn writes: strings holding brackets and escapes."""
    from cotdyn.files.strict import json_depth

    for value, depth in (([], 1), ({"a": "[[[{"}, 1), (["\\", [[1]]], 3), ("x", 0), ({"a": ['\\"[']}, 2)):
        assert json_depth(json.dumps(value)) == depth


def test_a_dictionary_bomb_in_a_list_of_texts_is_refused_and_real_options_pass(tmp_path):
    """A problems table's options are a list of texts: bounded through the list, as a flat column is
    (a nested column was refused outright, so every multiple-choice study failed its audit)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cotdyn.audit.derive import read_problems

    text = "".join(map(chr, np.random.default_rng(1).integers(97, 123, 150_000)))
    options = pa.DictionaryArray.from_arrays(pa.array(np.zeros(400_000, dtype=np.int32)), pa.array([text]))
    lists = pa.ListArray.from_arrays(pa.array(np.arange(0, 400_001, 4, dtype=np.int32)), options)
    pq.write_table(pa.table({"options": lists}), bomb := tmp_path / "bomb.parquet")
    with pytest.raises(UntrustedFileError, match="decodes to 60000000000 bytes"):
        read_problems(bomb)
    pd.DataFrame({"problem_id": ["a", "b"], "options": [["x", "y"], ["x", "z"]]}).to_parquet(
        fine := tmp_path / "ok.parquet"
    )
    assert read_problems(fine)["options"].map(list).tolist() == [["x", "y"], ["x", "z"]]
