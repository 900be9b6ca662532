"""The benchmark registry (cotdyn.grading.registry): seed 002's tasks on fixture files in their real row
formats, a researcher's JSONL, the errors that name file, row and field, and the plan's frozen hash."""

import json
import warnings
from pathlib import Path

import pytest
import yaml
from conftest import PLAN

from cotdyn.audit.check import benchmark_hash_problems
from cotdyn.dataset.benchmarks import (
    BenchmarkError,
    Problem,
    content_sha256,
    load_benchmark,
    problems_from_table,
    problems_table,
)
from cotdyn.grading.registry import REGISTRY, answer_rule, package_of
from cotdyn.plan.config import ConfigError, resolve_cells
from cotdyn.plan.load import load_plan

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"


def view_of(folder: Path):
    """The audit's view of ``folder`` as it is now (cotdyn.audit.view): a file rewritten after a view
    was taken is refused by that view, so each check below takes its own."""
    from cotdyn.audit.untrusted import refuse_links
    from cotdyn.audit.view import study_view

    return study_view(folder, refuse_links(folder), [])


def _quiet_load(spec: dict) -> list[Problem]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_benchmark(spec)


def test_arc_rows_become_choice_problems_with_the_gold_letter_by_position():
    problems = _quiet_load({"kind": "arc", "path": str(FIXTURES / "arc_challenge_test.jsonl")})
    assert [(p.problem_id, p.gold_raw, p.gold) for p in problems] == [
        ("Mercury_7175875", "C", "C"),
        ("Mercury_SC_409171", "B", "B"),
        ("NYSEDREGENTS_2015_8_28", "2", "B"),  # labels 1-4: the second option is shown as (B)
        ("Mercury_7041615", "B", "B"),
    ]
    assert problems[2].options == ("respiration", "photosynthesis", "digestion", "excretion")
    assert "\n(B) photosynthesis\n" in problems[2].question and "(E) they dissolve in water" in problems[3].question


def test_svamp_joins_body_and_question_and_reads_the_float_answer():
    problems = _quiet_load({"kind": "svamp", "path": str(FIXTURES / "svamp_test.jsonl")})
    assert [(p.problem_id, p.gold) for p in problems] == [("chal-777", "145"), ("chal-253", "3"), ("chal-100", "21")]
    assert problems[1].question == (
        "Edward spent $ 6 to buy 2 books each book costing him the same amount of money. Now he has $ 12. "
        "How much did each book cost?"
    )


def test_math_algebra_keeps_the_algebra_subject_and_takes_the_gold_from_the_solutions_box():
    problems = _quiet_load({"kind": "math_algebra", "path": str(FIXTURES / "hendrycks_math_algebra_test.jsonl")})
    assert [(p.problem_id, p.gold) for p in problems] == [
        ("math_algebra-0000", "2"),
        ("math_algebra-0001", "10"),
        ("math_algebra-0003", "-4"),  # row 3 is Intermediate Algebra; ids keep the source row
    ]


def test_a_registered_benchmark_without_a_pinned_hash_loads_with_a_loud_warning(capsys):
    with pytest.warns(UserWarning, match="UNVERIFIED BENCHMARK: .*svamp_test.jsonl .*no content sha256"):
        problems = load_benchmark({"kind": "svamp", "path": str(FIXTURES / "svamp_test.jsonl")})
    assert f"found {content_sha256(problems)}" in capsys.readouterr().err


def test_a_pinned_hash_is_checked():
    spec = {"kind": "svamp", "path": str(FIXTURES / "svamp_test.jsonl")}
    found = content_sha256(_quiet_load(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pinned, matching hash warns of nothing
        assert len(load_benchmark({**spec, "content_sha256": found, "limit": 2})) == 2
    with pytest.raises(BenchmarkError, match=f"content sha256 {found} differs from the pinned 0{{64}}"):
        load_benchmark({**spec, "content_sha256": "0" * 64})


@pytest.mark.parametrize("kind", ["arc", "svamp", "math_algebra"])
def test_seed_002_tasks_refuse_the_hub_without_a_pinned_revision(kind):
    # a declaration pins no revision and no hash: those are a plan's (or a config's), and no plan pins these
    assert "revision" not in REGISTRY[kind].hub and not hasattr(REGISTRY[kind], "content_sha256")
    with pytest.raises(BenchmarkError, match=f"benchmark {kind}: no pinned hub revision"):
        load_benchmark({"kind": kind})


def test_the_hub_path_reads_the_registered_repo_at_the_configs_revision(monkeypatch):
    import cotdyn.dataset.benchmarks as B

    rows = [json.loads(line) for line in (FIXTURES / "arc_challenge_test.jsonl").read_text().splitlines()]
    calls = []
    monkeypatch.setattr(B, "read_hub", lambda *args: calls.append(args) or rows)
    problems = _quiet_load({"kind": "arc", "hub": {"revision": "abc123"}})
    assert calls == [("allenai/ai2_arc", "ARC-Challenge", "test", "abc123")] and len(problems) == 4


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


MC_ROWS = [
    {"qid": "q1", "stem": "Which is a mammal?", "opts": ["shark", "whale", "trout"], "key": "B"},
    {
        "qid": "q2",
        "stem": "Which gas do plants take in?",
        "opts": ["oxygen", "carbon dioxide"],
        "key": "carbon dioxide",
    },
]
MC_FIELDS = {"question": "stem", "gold": "key", "id": "qid", "options": "opts"}


def test_a_researchers_multiple_choice_jsonl(tmp_path):
    spec = {"kind": "jsonl", "path": _write_jsonl(tmp_path / "mc.jsonl", MC_ROWS), "fields": MC_FIELDS}
    problems = _quiet_load({**spec, "answer": "choice"})
    assert [(p.problem_id, p.gold, p.options) for p in problems] == [
        ("q1", "B", ("shark", "whale", "trout")),
        ("q2", "B", ("oxygen", "carbon dioxide")),  # the gold given as the option's text
    ]
    assert answer_rule({**spec, "answer": "choice"}) == "choice"
    table = problems_table(problems)
    assert list(table.columns) == ["problem_id", "question", "gold_raw", "gold", "options"]
    assert problems_from_table(table) == problems


def test_tables_of_benchmarks_without_options_keep_their_columns():
    problems = _quiet_load({"kind": "svamp", "path": str(FIXTURES / "svamp_test.jsonl")})
    assert list(problems_table(problems).columns) == ["problem_id", "question", "gold_raw", "gold"]


@pytest.mark.parametrize(
    "rows, answer, message",
    [
        (
            [{"stem": "q", "key": "A", "opts": ["x", "y"]}, {"stem": "q"}],
            "choice",
            r"mc.jsonl: line 2 has no field 'key'",
        ),
        ([{"stem": "q", "key": "Z", "opts": ["x", "y"]}], "choice", r"mc.jsonl: line 1, field 'key': gold answer 'Z'"),
        ([{"stem": "q", "key": "A", "opts": "x, y"}], "choice", r"mc.jsonl: line 1, field 'opts': options must be"),
        ([{"stem": "q", "key": "twelve"}], "number", r"line 1, field 'key': gold answer 'twelve' does not parse"),
    ],
)
def test_a_bad_row_names_the_file_the_row_and_the_field(tmp_path, rows, answer, message):
    fields = (
        {"question": "stem", "gold": "key", "options": "opts"}
        if answer == "choice"
        else {"question": "stem", "gold": "key"}
    )
    spec = {"kind": "jsonl", "path": _write_jsonl(tmp_path / "mc.jsonl", rows), "fields": fields, "answer": answer}
    with pytest.raises(BenchmarkError, match=message):
        _quiet_load(spec)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"kind": "jsonl", "path": "x.jsonl", "fields": {"question": "q", "gold": "a"}}, "missing key 'answer'"),
        ({"kind": "jsonl", "path": "x.jsonl", "fields": {"question": "q"}, "answer": "number"}, "fields has no 'gold'"),
        ({"kind": "jsonl", "path": "x.jsonl", "fields": {"question": "q", "gold": "a"}, "answer": "choice"},
         "needs fields.options"),
        ({"kind": "jsonl", "path": "x.jsonl", "fields": {"question": "q", "gold": "a"}, "answer": "letter"},
         "answer 'letter' is not an answer type"),
        ({"kind": "mmlu"}, "unknown benchmark kind 'mmlu'"),
    ],
)  # fmt: skip
def test_a_bad_benchmark_entry_is_named_in_the_config(spec, message):
    config = {"cells": ["sim-b"], "models": {"sim": {"backend": "simulated"}}, "benchmarks": {"b": spec}}
    with pytest.raises(ConfigError, match=f"study.yaml: benchmarks.b: .*{message}"):
        resolve_cells(config, {}, "study.yaml")


# --- registration: a plan names a registered benchmark and freezes its content hash ---------------


def _plan_with(tmp_path, benchmarks: dict) -> Path:
    plan = yaml.safe_load(PLAN.read_text())
    plan["panel"]["benchmarks"] = benchmarks
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def test_a_plan_names_a_registered_benchmark_with_its_content_hash(tmp_path):
    arc = {"kind": "arc", "path": str(FIXTURES / "arc_challenge_test.jsonl")}
    frozen = content_sha256(_quiet_load(arc))
    plan = load_plan(_plan_with(tmp_path, {"arc": {"kind": "arc", "content_sha256": frozen}}))
    config = {"cells": ["sim-arc"], "models": {"sim": {"backend": "simulated"}}, "benchmarks": {"arc": arc}}
    (cell,) = resolve_cells(config, plan).values()
    assert cell.benchmark["content_sha256"] == frozen and cell.answer_rule == "arc"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_benchmark(cell.benchmark)) == 4
    other = load_plan(_plan_with(tmp_path, {"arc": {"kind": "arc", "content_sha256": "f" * 64}}))
    (cell,) = resolve_cells(config, other).values()
    with pytest.raises(BenchmarkError, match=f"content sha256 {frozen} differs from the pinned f{{64}}"):
        load_benchmark(cell.benchmark)


@pytest.mark.parametrize(
    "entry, message",
    [({"kind": "mmlu", "content_sha256": "0" * 64}, "'mmlu' is not a registered benchmark"),
     ({"kind": "arc"}, "content_sha256 must be"), ({"kind": "arc", "content_sha256": "abc"}, "content_sha256 must be")],
)  # fmt: skip
def test_the_plan_reader_refuses_an_unregistered_or_unhashed_benchmark(tmp_path, entry, message):
    with pytest.raises(ValueError, match=f"plan.yaml: panel.benchmarks.arc: {message}"):
        load_plan(_plan_with(tmp_path, {"arc": entry}))


def test_the_audit_rechecks_the_frozen_hash_against_the_stored_problems(tmp_path):
    problems = _quiet_load({"kind": "arc", "path": str(FIXTURES / "arc_challenge_test.jsonl")})
    (tmp_path / "problems").mkdir()
    problems_table(problems).to_parquet(tmp_path / "problems" / "arc.parquet")
    frozen = content_sha256(problems)
    config = {"benchmarks": {"arc": {"kind": "arc", "path": "x"}}}
    plan = {"panel": {"benchmarks": {"arc": {"kind": "arc", "content_sha256": frozen}}}}
    assert benchmark_hash_problems(view_of(tmp_path), config, plan) == []
    edited = problems_table(problems[:3] + [Problem("Mercury_7041615", "edited", "B", "B", problems[3].options)])
    edited.to_parquet(tmp_path / "problems" / "arc.parquet")
    assert benchmark_hash_problems(view_of(tmp_path), config, plan) == [
        f"problems/arc.parquet: content sha256 {content_sha256(problems_from_table(edited))} differs from the "
        f"plan's {frozen}"
    ]
    config["benchmarks"]["arc"]["content_sha256"] = "e" * 64
    assert (
        f"the config pins content sha256 {'e' * 64}, the plan {frozen}"
        in benchmark_hash_problems(view_of(tmp_path), config, plan)[0]
    )
    # a limited cell stores a subset: its hash was checked in full when it loaded
    limited = {"benchmarks": {"arc": {"kind": "arc", "path": "x", "limit": 2}}}
    assert benchmark_hash_problems(view_of(tmp_path), limited, plan) == []


def test_the_registered_plan_still_reads(plan):
    assert set(plan["panel"]["benchmarks"]) == {"gsm8k", "math500"}
    # cotdyn's own benchmarks (a lab's installed beside them are not this test's)
    own = [name for name in REGISTRY if package_of(name).startswith("cotdyn ")]
    assert own == ["gsm8k", "math500", "arithmetic", "arc", "svamp", "math_algebra"]
