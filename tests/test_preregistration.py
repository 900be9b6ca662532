"""Preregistration as code (docs/reference.md section 7): REGISTERED, deviations, plan.md."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from cotdyn.audit.check import write_plan_check
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.plan_md import render_plan_md
from cotdyn.plan.registration import (
    Deviation,
    PreregistrationError,
    check_cell,
    check_registered,
    load_deviations,
    protocol_differences,
    read_registered,
    register,
)
from cotdyn.plan.timelock import PLAN_LOCK_KEY

ROOT = Path(__file__).resolve().parents[1]
PREREG = ROOT / "preregistration"


@pytest.fixture
def prereg(tmp_path) -> Path:
    """A copy of the registered plan, registered in a scratch preregistration/ directory."""
    d = tmp_path / "preregistration"
    d.mkdir()
    shutil.copy(PREREG / "plan.yaml", d / "plan.yaml")
    register(d / "plan.yaml", d / "REGISTERED", "2026-11-30")
    return d


V1, V2, V3, V4 = PREREG / "v1", PREREG / "v2", PREREG / "v3", PREREG / "v4"
# The earlier registrations' hashes, frozen: each version is kept byte for byte in its own folder.
V1_SHA256 = "9d84e020dacb8503b0ab9b0d94848f7aba57b1d2ccca2b86097f343930d097dd"
V2_SHA256 = "babb73081c7d12ce4275636269cd95df18b94c2cb2e4cfe168e5c49d68942f85"
V3_SHA256 = "169faaf0b59bfe700e8e979afa9387b1bf053879b26bbf6dc071597dd75c778d"
V4_SHA256 = "eca2ca28d8d4ac256555fe8a45cdbb0fa616face3e3acf77fc10789d544618bf"


def test_committed_registration_matches_the_plan():
    assert check_registered(PREREG / "plan.yaml", PREREG / "REGISTERED") == plan_sha256(PREREG / "plan.yaml")
    assert read_registered(PREREG / "REGISTERED")["date"] == "2026-12-07"
    assert load_plan(PREREG / "plan.yaml")["plan_version"] == 5
    assert load_deviations(PREREG / "deviations.yaml") == []


@pytest.mark.parametrize("directory", [PREREG, PREREG / "examples" / "default"])
def test_a_v5_registration_records_its_power_table(directory):
    """The table cotdyn register computed (issue 62) lies beside REGISTERED, which records its sha256;
    the embedded default registers it underpowered, and says how."""
    record = read_registered(directory / "REGISTERED")
    table = directory / record["power_table"]
    assert hashlib.sha256(table.read_bytes()).hexdigest() == record["power_table_sha256"]
    result = json.loads(table.read_text())
    effects = load_plan(directory / "plan.yaml")["assumed_effects"]
    assert (result["reps"], result["seed"], result["min_power"]) == (
        effects["replicates"],
        effects["seed"],
        effects["min_power"],
    )
    below = [h["id"] for h in result["hypotheses"] if h["powered"] and h["underpowered"]]
    assert bool(below) == ("underpowered" in record)
    assert all(f"{hid}: power" in record.get("underpowered", "") for hid in below)


def test_plan_version_4_is_kept_registered_and_unchanged():
    assert check_registered(V4 / "plan.yaml", V4 / "REGISTERED") == V4_SHA256
    assert read_registered(V4 / "REGISTERED")["date"] == "2026-12-06"
    assert load_plan(V4 / "plan.yaml")["plan_version"] == 4
    assert load_deviations(V4 / "deviations.yaml") == []


def test_plan_version_3_is_kept_registered_and_unchanged():
    assert check_registered(V3 / "plan.yaml", V3 / "REGISTERED") == V3_SHA256
    assert read_registered(V3 / "REGISTERED")["date"] == "2026-12-02"
    assert load_plan(V3 / "plan.yaml")["plan_version"] == 3
    assert load_deviations(V3 / "deviations.yaml") == []


def test_plan_version_2_is_kept_registered_and_unchanged():
    assert check_registered(V2 / "plan.yaml", V2 / "REGISTERED") == V2_SHA256
    assert read_registered(V2 / "REGISTERED")["date"] == "2026-12-01"
    assert load_plan(V2 / "plan.yaml")["plan_version"] == 2
    assert load_deviations(V2 / "deviations.yaml") == []


def test_plan_version_1_is_kept_registered_and_unchanged():
    assert check_registered(V1 / "plan.yaml", V1 / "REGISTERED") == V1_SHA256
    assert read_registered(V1 / "REGISTERED")["date"] == "2026-11-30"
    assert load_plan(V1 / "plan.yaml")["plan_version"] == 1
    assert load_deviations(V1 / "deviations.yaml") == []


@pytest.mark.parametrize("directory", [PREREG, V1, V2, V3, V4, PREREG / "examples" / "default"])
def test_committed_plan_md_is_the_rendering_of_plan_yaml(directory):
    record = read_registered(directory / "REGISTERED")
    table = json.loads((directory / record["power_table"]).read_text()) if "power_table" in record else None
    assert (directory / "plan.md").read_text() == render_plan_md(load_plan(directory / "plan.yaml"), table)
    assert ("## Power at registration" in (directory / "plan.md").read_text()) == (table is not None)


@pytest.mark.parametrize(
    "previous, this, blocks",
    [
        (V1, V2, ("holm", "analysis", "hypotheses")),
        (V2, V3, ("analysis", "verdict_rule")),
        (V3, V4, ("time_lock", "protocol", "analysis", "verdict_rule", "hypotheses")),
        (V4, PREREG, ("assumed_effects", "time_lock")),
    ],
)
def test_plan_md_lists_every_deviation_from_the_previous_version(previous, this, blocks):
    v1, v2 = load_plan(previous / "plan.yaml"), load_plan(this / "plan.yaml")
    text = render_plan_md(v2)
    changes = v2["changes_from_previous_version"]
    for change in changes:
        assert f"| {change['key']} |" in text
    listed = {c["key"].split(".")[0].split(" ")[0] for c in changes}
    # every top-level block whose registered values differ is named by at least one change
    derived = {"changes_from_previous_version", PLAN_LOCK_KEY}  # not registered values themselves
    differing = {k for k in set(v1) | set(v2) if v1.get(k) != v2.get(k)} - derived
    assert differing <= listed | {"verdict_rule"}, differing - listed
    for block in blocks:
        assert block in listed
    assert "## Deviations from the previous plan version" not in render_plan_md(load_plan(V1 / "plan.yaml"))


def test_plan_md_carries_every_registered_value(plan):
    text = render_plan_md(plan)
    for key, value in plan["protocol"].items():
        assert f"| {key} | {value} |" in text
    for h in plan["hypotheses"]:
        assert f"| {h['id']} | {h['role']} | {h['statistic']} |" in text
    changed = dict(plan, protocol=dict(plan["protocol"], epsilon=0.02))
    assert "| epsilon | 0.02 |" in render_plan_md(changed)


def test_register_writes_hash_and_date_and_never_overwrites(prereg):
    assert read_registered(prereg / "REGISTERED") == {
        "plan_sha256": plan_sha256(prereg / "plan.yaml"),
        "date": "2026-11-30",
    }
    before = (prereg / "REGISTERED").read_text()
    with pytest.raises(PreregistrationError, match="never overwritten"):
        register(prereg / "plan.yaml", prereg / "REGISTERED", "2027-01-01")
    assert (prereg / "REGISTERED").read_text() == before


def test_edited_plan_is_refused_naming_both_hashes(prereg):
    registered = plan_sha256(prereg / "plan.yaml")
    path = prereg / "plan.yaml"
    path.write_text(path.read_text().replace("epsilon: 0.01", "epsilon: 0.02"))
    edited = plan_sha256(path)
    with pytest.raises(PreregistrationError) as e:
        check_registered(path, prereg / "REGISTERED")
    assert registered in str(e.value) and edited in str(e.value)


def test_protocol_differences_in_plan_order(plan):
    used = dict(plan["protocol"], m=10, reference_temperature=0.6)
    assert protocol_differences(plan, used) == [("reference_temperature", 0.7, 0.6), ("m", 5, 10)]
    assert protocol_differences(plan, dict(plan["protocol"])) == []
    with pytest.raises(PreregistrationError, match="tempreature"):
        protocol_differences(plan, dict(plan["protocol"], tempreature=1.0))


def test_undeclared_difference_names_parameter_values_and_cell(plan):
    used = dict(plan["protocol"], continuation_temperature=1.0)
    with pytest.raises(PreregistrationError) as e:
        check_cell("qwen7b-gsm8k", used, plan, [])
    message = str(e.value)
    assert "continuation_temperature" in message and "1.0" in message and "0.7" in message
    assert "qwen7b-gsm8k" in message


def test_declared_difference_is_returned_and_must_match_exactly(plan):
    used = dict(plan["protocol"], continuation_temperature=1.0)
    declared = Deviation("qwen7b-gsm8k", "continuation_temperature", 0.7, 1.0, "reason")
    assert check_cell("qwen7b-gsm8k", used, plan, [declared]) == [declared]
    everywhere = Deviation("*", "continuation_temperature", 0.7, 1.0, "reason")
    assert check_cell("qwen7b-math500", used, plan, [everywhere]) == [everywhere]
    with pytest.raises(PreregistrationError, match="qwen7b-math500"):  # declared for another cell
        check_cell("qwen7b-math500", used, plan, [declared])
    with pytest.raises(PreregistrationError, match="continuation_temperature"):  # other value declared
        check_cell("qwen7b-gsm8k", used, plan, [Deviation("qwen7b-gsm8k", "continuation_temperature", 0.7, 0.9, "r")])


@pytest.mark.parametrize(
    "entries, message",
    [
        ({"cell": "x"}, "expected a list"),
        (["text"], "deviation 1: expected a mapping"),
        ([{"cell": "a", "parameter": "m", "registered": 5, "used": 10}], "deviation 1: missing field.*reason"),
        (
            [{"cell": "a", "parameter": "m", "registered": 5, "used": 10, "reason": "r", "by": "me"}],
            "deviation 1: unknown field.*by",
        ),
        (
            [
                {"cell": "a", "parameter": "m", "registered": 5, "used": 10, "reason": "ok"},
                {"cell": "", "parameter": "m", "registered": 5, "used": 10, "reason": "r"},
            ],
            "deviation 2: field 'cell'",
        ),
    ],
)
def test_bad_deviations_file_names_file_and_entry(tmp_path, entries, message):
    path = tmp_path / "deviations.yaml"
    path.write_text(yaml.safe_dump(entries))
    with pytest.raises(PreregistrationError, match=message) as e:
        load_deviations(path)
    assert str(path) in str(e.value)


def _config(prereg: Path, confirmatory: list[str], protocol: dict) -> dict:
    return {
        "study": "t",
        "plan": str(prereg / "plan.yaml"),
        "cells": ["qwen7b-gsm8k", "qwen7b-math500"],
        "confirmatory": confirmatory,
        "protocol": protocol,
        "variants": {"registered": {}},
        "models": {"qwen7b": {"backend": "simulated"}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k"}, "math500": {"kind": "math500"}},
    }


def test_plan_check_refuses_undeclared_and_lists_declared_deviations(prereg, tmp_path):
    config = _config(prereg, ["qwen7b-gsm8k"], {"reference_temperature": 0.6})
    out = tmp_path / "plan_check.json"
    with pytest.raises(PreregistrationError, match=r"qwen7b-gsm8k.*reference_temperature.*0\.6.*0\.7"):
        write_plan_check(prereg / "plan.yaml", config, out)
    assert not out.exists()
    entry = {
        "cell": "qwen7b-gsm8k",
        "parameter": "reference_temperature",
        "registered": 0.7,
        "used": 0.6,
        "reason": "test",
    }
    (prereg / "deviations.yaml").write_text(yaml.safe_dump([entry]))
    write_plan_check(prereg / "plan.yaml", config, out)
    check = json.loads(out.read_text())
    assert check["cells"]["qwen7b-gsm8k"] == {"confirmatory": True, "deviations": [entry]}
    # The exploratory cell is not held to the plan, but its difference is on record.
    assert check["cells"]["qwen7b-math500"]["differences"]["registered"] == [
        {"parameter": "reference_temperature", "registered": 0.7, "used": 0.6}
    ]
    assert check["plan_sha256"] == plan_sha256(prereg / "plan.yaml")


def test_plan_check_refuses_an_edited_plan(prereg, tmp_path):
    path = prereg / "plan.yaml"
    path.write_text(path.read_text() + "\n# an edit\n")
    with pytest.raises(PreregistrationError, match="edited after registration"):
        write_plan_check(path, _config(prereg, [], {}), tmp_path / "plan_check.json")
