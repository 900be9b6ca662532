"""The benchmark files the repository ships, and the script that makes them again from the hub."""

import hashlib
import importlib.util
import json

import pytest
from conftest import DATA, ROOT


def fetch_data_module():
    spec = importlib.util.spec_from_file_location("fetch_data", ROOT / "scripts" / "fetch_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["gsm8k", "math500"])
def test_the_shipped_files_have_their_documented_sha256(name):
    file, sha256, _ = fetch_data_module().FILES[name]
    assert hashlib.sha256((DATA / file).read_bytes()).hexdigest() == sha256
    assert sha256 in (DATA / "README.md").read_text()


@pytest.mark.parametrize("name", ["gsm8k", "math500"])
def test_fetching_the_hub_rows_writes_the_shipped_bytes(name, plan, monkeypatch):
    """The hub path, offline: read_hub is handed the rows the hub serves (here, the shipped file's)."""
    fetch_data = fetch_data_module()
    file = fetch_data.FILES[name][0]
    rows = [json.loads(line) for line in (DATA / file).read_text(encoding="utf-8").splitlines()]
    asked = []
    monkeypatch.setattr(fetch_data, "read_hub", lambda *args: asked.append(args) or rows)
    spec = plan["panel"]["benchmarks"][name]
    assert fetch_data.fetch(name, spec) == (DATA / file).read_bytes()
    hub = spec["hub"]
    assert asked == [(hub["repo"], hub.get("config"), hub["split"], hub["revision"])]
    monkeypatch.setattr(fetch_data, "read_hub", lambda *args: rows[:-1])
    with pytest.raises(SystemExit, match="content sha256"):
        fetch_data.fetch(name, spec)
