"""A benchmark is one declaration (``cotdyn.grading.registry.register``, issue 38): declared here, in
the test, it reaches the config schema's ``kind`` enum, the plan check, ``cotdyn init --benchmark``
(which writes its config and plan entries) and ``cotdyn extract``'s choices, and its content hash is
pinned once, in the plan."""

from __future__ import annotations

import json
import warnings

import pytest
import yaml
from conftest import ROOT

from cotdyn.cli.init import InitError, write_skeleton
from cotdyn.cli.main import parser
from cotdyn.dataset.benchmarks import content_sha256, load_benchmark
from cotdyn.generation.backends.validation import validate_config  # benchmarks and backends filled in
from cotdyn.grading import registry
from cotdyn.grading.answers import extract, gold_answer
from cotdyn.plan.config import ConfigError, resolve_cells
from cotdyn.plan.load import load_plan

REGISTERED_PLAN = str(ROOT / "preregistration" / "plan.yaml")
ROWS = [
    {"qid": f"t{i}", "q": f"What is {i} + {i}?", "sol": f"{i} and {i} make {2 * i}. => {2 * i}"} for i in range(1, 4)
]


@pytest.fixture
def tiny(tmp_path):
    """A benchmark declared by the test: a local copy, its own fields and a gold after '=>'."""
    source = tmp_path / "tiny.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    declared = registry.register(
        registry.Benchmark(
            "tiny", "number", {"question": "q", "gold": "sol", "id": "qid"}, source=str(source), gold_after="=>"
        )
    )
    yield declared
    del registry.REGISTRY["tiny"]


def _config(benchmarks: dict) -> dict:
    config = yaml.safe_load((ROOT / "config" / "simulated.yaml").read_text())
    return {**config, "benchmarks": benchmarks}


def test_a_declared_benchmark_is_a_kind_the_schema_takes(tiny):
    validate_config(_config({"t": {"kind": "tiny"}}), "test")
    with pytest.raises(ConfigError, match=r"benchmarks\.t\.kind: 'tinier' is not one of \[.*'tiny', 'jsonl'\]"):
        validate_config(_config({"t": {"kind": "tinier"}}), "test")


def test_without_its_declaration_the_schema_refuses_the_name():
    with pytest.raises(ConfigError, match="'tiny' is not one of"):
        validate_config(_config({"t": {"kind": "tiny"}}), "test")


def test_its_answer_format_comes_from_the_declaration(tiny):
    assert gold_answer(ROWS[1]["sol"], "tiny") == "4" and extract("so 4", "tiny").answer == "4"
    assert gold_answer("no marker, 4", "tiny") is None


def test_cotdyn_init_writes_its_config_and_plan_entries_and_pins_the_hash_once(tiny, tmp_path):
    write_skeleton(
        tmp_path / "s", None, None, {}, benchmark="tiny", backend="simulated", registered_plan=REGISTERED_PLAN
    )
    config = yaml.safe_load((tmp_path / "s" / "config.yaml").read_text())
    plan = load_plan(tmp_path / "s" / "plan.yaml")  # the plan check knows the declared name
    found = content_sha256(load_benchmark({"kind": "tiny", "path": tiny.source, "content_sha256": None}))
    assert config["benchmarks"] == {"tiny": {"kind": "tiny", "path": tiny.source}}
    assert plan["panel"]["benchmarks"] == {"tiny": {"kind": "tiny", "n": 3, "content_sha256": found}}
    (cell,) = resolve_cells(config, plan).values()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pinned: no UNVERIFIED warning
        assert [p.gold for p in load_benchmark(cell.benchmark)] == ["2", "4", "6"]
    # a config that pins another hash than its plan is refused before anything loads
    config["benchmarks"]["tiny"]["content_sha256"] = "0" * 64
    with pytest.raises(ConfigError, match="benchmarks.tiny.content_sha256 0{64} differs from the plan's"):
        resolve_cells(config, plan, "s/config.yaml")


def test_the_command_lines_offer_the_declared_name(tiny, capsys):
    args = parser().parse_args(["extract", "--benchmark", "tiny"])
    assert args.benchmark == "tiny"
    with pytest.raises(SystemExit):
        parser().parse_args(["init", "x", "--help"])
    assert "tiny" in capsys.readouterr().out.replace("\n", " ")


def test_a_benchmark_the_registered_plan_pins_takes_its_revision_and_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # math500's local copy is declared relative to the checkout
    write_skeleton(
        tmp_path / "s", None, None, {}, benchmark="math500", backend="simulated", registered_plan=REGISTERED_PLAN
    )
    config = yaml.safe_load((tmp_path / "s" / "config.yaml").read_text())
    plan = load_plan(tmp_path / "s" / "plan.yaml")
    registered = load_plan(REGISTERED_PLAN)["panel"]["benchmarks"]["math500"]
    assert plan["panel"]["benchmarks"]["math500"] == {"kind": "math500", **registered}
    assert config["benchmarks"]["math500"] == {"kind": "math500", "path": "data/math500_test.jsonl"}
    # a local copy that is not the rows the registered plan pins is refused, both hashes named
    other = tmp_path / "math500.jsonl"
    other.write_text("".join((ROOT / "data" / "math500_test.jsonl").read_text().splitlines(True)[:10]))
    with pytest.raises(InitError, match="differs from the registered plan's 735db0f5"):
        write_skeleton(tmp_path / "t", str(other), None, {}, benchmark="math500", backend="simulated",
                       registered_plan=REGISTERED_PLAN)  # fmt: skip


def test_init_names_what_it_needs(tmp_path):
    with pytest.raises(InitError, match="declared benchmark \\(--benchmark one of gsm8k, math500, .*\\), not mine"):
        write_skeleton(tmp_path / "s", None, None, {}, benchmark="mine", registered_plan=REGISTERED_PLAN)
    with pytest.raises(InitError, match="give it as --jsonl FILE"):
        write_skeleton(tmp_path / "s", None, "number", {}, benchmark="mine", registered_plan=REGISTERED_PLAN)
    with pytest.raises(InitError, match="no local copy is declared"):
        write_skeleton(tmp_path / "s", None, None, {}, benchmark="arc", registered_plan=REGISTERED_PLAN)


@pytest.mark.parametrize(
    "declaration, message",
    [(registry.Benchmark("gsm8k", "number", {"question": "q", "gold": "a"}), "declared already"),
     (registry.Benchmark("jsonl", "number", {"question": "q", "gold": "a"}), "reserved kind"),
     (registry.Benchmark("x", "numeric", {"question": "q", "gold": "a"}), "'numeric' is not an answer type"),
     (registry.Benchmark("x", "number", {"question": "q"}), "fields has no 'gold'")],
)  # fmt: skip
def test_a_declaration_is_refused_with_its_fault_named(declaration, message):
    with pytest.raises(ValueError, match=message):
        registry.register(declaration)
    assert "x" not in registry.REGISTRY


def test_a_redeclared_rule_is_what_normalizes_not_a_cached_class():
    """normalize caches classes (grading.answers._normalized) by the declaration's own rule too: a
    benchmark declared again under its name with another rule normalizes by the new one."""
    from cotdyn.grading.answers import normalize

    fields = {"question": "q", "gold": "sol"}
    for rule, expected in ((str.upper, "ABC"), (str.lower, "abc")):
        registry.register(registry.Benchmark("cased", "string", fields, normalize=rule))
        try:
            assert normalize("aBc", "cased") == expected
        finally:
            del registry.REGISTRY["cased"]
