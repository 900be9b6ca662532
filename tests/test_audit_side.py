"""The audit's second process (cotdyn.audit.parallel): what it is asked (each cache folder's rows,
math-verify's verdicts on the grading page's pairs) it answers as the audit's own process would,
without loading pandas, pyarrow or the analysis libraries (its memory counts in the audit's
target: issue 52 item 6)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cotdyn.audit.cache_rows import cached_row, folder_rows
from cotdyn.audit.parallel import Side
from cotdyn.generation.backends.base import Completion
from cotdyn.generation.cache import GenerationCache
from cotdyn.grading.symbolic import math_verify_verdicts

PAIRS = [("\\frac{2}{4}", "\\frac12"), ("0.5", "\\frac{1}{2}"), ("3", "4")]


def a_cache(folder: Path) -> list[str]:
    """A cache folder of three shards, one key in two of them, and two damaged shards: one torn, one
    whose checksummed body is no object of keys."""
    cache = GenerationCache(folder)
    cache.put({"a": [Completion((1, 2), "one", "stop")], "b": [Completion((3,), "two", "length")]})
    cache.put({"b": [Completion((4, 5), "two again", "stop"), Completion((6,), "ü", "stop")]})
    cache.put({"c": [Completion((1.5, 2), "float ids", "stop")]})
    (folder / ("0" * 64 + ".json")).write_text('{"sha256": "0", "bo')
    body = json.dumps([["a", 1]])
    (folder / ("f" * 64 + ".json")).write_text(
        json.dumps({"sha256": hashlib.sha256(body.encode()).hexdigest(), "body": body})
    )
    return ["a", "b", "c"]


def test_a_cache_folder_is_read_as_the_cache_loaded_whole_holds_it(tmp_path):
    keys = a_cache(tmp_path)
    whole = GenerationCache(tmp_path, read_only=True)
    assert len(whole.rejected) == 2, whole.rejected  # the torn shard and the list body, named, not a crash
    expected = {k: [cached_row(c.token_ids, c.text, c.finish_reason) for c in whole.get(k)] for k in keys[:2]}
    assert folder_rows(tmp_path, keys[:2]) == expected  # the last shard holding a key gives its rows
    ((error, reason),) = folder_rows(tmp_path, ["c"])["c"]
    assert isinstance(error, TypeError) and reason == "stop"  # ids that are no integers: an error, never equal
    assert folder_rows(tmp_path, ["zz"]) == {}


@pytest.mark.parametrize("processes", [1, 2])
def test_the_second_process_answers_as_this_one_and_raises_what_a_job_raised(tmp_path, processes):
    keys = a_cache(tmp_path / "cache")
    side = Side(tmp_path, processes)
    try:
        side.ask("cache-0", folder_rows, tmp_path / "cache", keys[:2])
        side.ask("verdicts", math_verify_verdicts, PAIRS)
        side.ask("wrong", folder_rows, tmp_path / "cache", None)  # no keys: a TypeError there
        assert side.answer("verdicts") == {PAIRS[0]: True, PAIRS[1]: True, PAIRS[2]: False}
        assert side.answer("cache-0") == folder_rows(tmp_path / "cache", keys[:2])
        with pytest.raises(TypeError):
            side.answer("wrong")
    finally:
        side.stop()


def test_the_second_process_loads_neither_pandas_nor_pyarrow_nor_the_analysis_libraries(tmp_path):
    """Its jobs' modules, imported and run as the second process runs them: what they load is the
    memory the second process adds to the audit's (numpy comes with sympy, some 15 MB)."""
    keys = a_cache(tmp_path)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from cotdyn.audit import parallel\n"
        "from cotdyn.audit.cache_rows import folder_rows\n"
        "from cotdyn.grading.symbolic import math_verify_verdicts\n"
        f"folder_rows(Path({str(tmp_path)!r}), {keys!r}); math_verify_verdicts({PAIRS!r})\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'pyarrow', 'scipy', 'matplotlib', 'statsmodels', 'sklearn'}))\n"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


def test_what_a_job_prints_does_not_reach_the_audit_as_an_answer(tmp_path, capfd):
    side = Side(tmp_path, 2)
    try:
        side.ask("printed", print, "cache-0")  # on the second process's standard output, before the job cache-0
        side.ask("cache-0", sorted, [2, 1])
        assert side.answer("cache-0") == [1, 2] and side.answer("printed") is None
    finally:
        side.stop()
    assert "cache-0" in capfd.readouterr().err
