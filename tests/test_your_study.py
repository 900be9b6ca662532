"""docs/your-study.md's walkthrough, run as written (on the simulated backend, the doc's way to try
it first), ends with registered verdicts for the walkthrough's cell; `cotdyn init`'s files."""

import json
import re
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT
from test_workflow import snakemake

from cotdyn.cli.init import InitError, write_skeleton
from cotdyn.dataset.benchmarks import content_sha256, load_benchmark
from cotdyn.plan.load import load_plan

DOC = ROOT / "docs" / "your-study.md"
MARKER = "<!-- walkthrough:"


def walkthrough() -> list[str]:
    """The command lines of the block after the walkthrough marker."""
    text = DOC.read_text()
    block = re.search(r"```sh\n(.*?)```", text[text.index(MARKER) :], re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def additions(n: int) -> str:
    rows = [{"id": f"q-{a}-{b}", "question": f"What is {a} + {b}?", "gold": str(a + b)} for a in range(1, 10)
            for b in range(1, 10)][:n]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


def run(line: str, cwd):
    """One line of the walkthrough: cotdyn through this interpreter, snakemake through the suite's helper."""
    words = line.split()
    if words[0] == "snakemake":
        return snakemake(*words[1:], cwd=cwd)
    assert words[0] == "cotdyn", line
    if words[1] == "init":
        words.append("--backend=simulated")  # the doc's "try it first" (docs/your-study.md, What you need)
        words.append("--power-reps=20")  # the power it prints, at fewer studies than register's 200
    result = subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    result.output = result.stdout + result.stderr
    return result


def test_the_walkthrough_names_the_four_steps():
    lines = walkthrough()
    assert [line.split()[:2] for line in lines] == [
        ["cotdyn", "init"],
        ["cotdyn", "register"],
        ["snakemake", "--cores"],
        ["cotdyn", "audit"],
    ]


@pytest.mark.slow
def test_the_walkthrough_as_written_ends_with_verdicts_for_its_cell(tmp_path):
    (tmp_path / "preregistration").symlink_to(ROOT / "preregistration")
    (tmp_path / "studies" / "mine").mkdir(parents=True)
    (tmp_path / "studies" / "mine" / "problems.jsonl").write_text(additions(60))
    for line in walkthrough():
        result = run(line, tmp_path)
        assert result.returncode == 0, f"{line}\n{result.output[-3000:]}"
        if line.startswith("cotdyn init"):  # before registration: the power its 60 problems give
            assert "power at this study's size (60 problems in sim-problems)" in result.output, result.output
    # the audit, the last line: first the registration it checked, then its verdict
    lines = result.output.splitlines()
    assert lines[0].startswith("plan ") and "registered 2026-12-01 (author's date; no timestamp token)" in lines[0]
    assert lines[1].startswith("audit of results/mine: PASS")
    result = json.loads((tmp_path / "results/mine/analysis/registered/hypotheses.json").read_text())
    cell = "sim-problems"  # the model's key on the simulated backend
    assert result["cells"][cell]["role"] == "registered"
    verdicts = result["verdicts"]
    assert set(verdicts) == {"H1", "H2", "H3", "H5"}
    assert all(v["verdict"] in ("supported", "not_supported", "not_estimable") for v in verdicts.values())
    # a numeric estimate with its CI for the cell: the planted truth makes monotone chains more accurate
    h1 = result["cells"][cell]["H1"]
    assert h1["gap_pp"] is not None and None not in h1["ci"], h1
    # the registered plan's rules apply: its small-group rule, and Holm in every interval verdict
    assert result["settings"]["groups"] == {"min_group_size": 10, "precise_group_size": 30}
    assert verdicts["H1"]["verdict_rule"] == ["ci_criterion", "holm_reject"]
    assert (tmp_path / "results/mine/report/registered/registered_results.html").exists()


def test_init_refuses_to_overwrite_and_names_bad_keys(tmp_path):
    data = tmp_path / "p.jsonl"
    data.write_text(additions(3))
    registered = str(ROOT / "preregistration" / "plan.yaml")
    write_skeleton(
        tmp_path / "s", str(data), "number", {"question": "question", "gold": "gold"}, registered_plan=registered
    )
    with pytest.raises(InitError, match="never overwrites"):
        write_skeleton(
            tmp_path / "s", str(data), "number", {"question": "question", "gold": "gold"}, registered_plan=registered
        )
    with pytest.raises(InitError, match="may hold only"):
        write_skeleton(tmp_path / "t", str(data), "number", {"question": "question", "gold": "gold"},
                       benchmark="my-data", registered_plan=registered)  # fmt: skip
    with pytest.raises(InitError, match="no field|missing|gold"):
        write_skeleton(tmp_path / "u", str(data), "number", {"question": "question", "gold": "answer"},
                       registered_plan=registered)  # fmt: skip


def test_init_copies_the_registered_protocol_and_analysis_and_names_the_cell(tmp_path):
    data = tmp_path / "p.jsonl"
    data.write_text(additions(12))
    registered = load_plan(ROOT / "preregistration" / "plan.yaml")
    write_skeleton(tmp_path / "s", str(data), "number", {"question": "question", "gold": "gold", "id": "id"},
                   registered_plan=str(ROOT / "preregistration" / "plan.yaml"))  # fmt: skip
    plan = load_plan(tmp_path / "s" / "plan.yaml")
    config = yaml.safe_load((tmp_path / "s" / "config.yaml").read_text())
    assert {k: v for k, v in plan["protocol"].items() if k != "dtype"} == {
        k: v for k, v in registered["protocol"].items() if k != "dtype"
    }
    assert plan["protocol"]["dtype"] == "float32"  # the embedded model on a CPU
    assert plan["analysis"] == registered["analysis"] and plan["verdict_rule"] == registered["verdict_rule"]
    # read by the registered plan's rules (version 5: the small-group and degenerate rules, Holm in the
    # verdict, the permutation test of H3, assumed effects), its generation locked to its own registration
    assert plan["plan_version"] == registered["plan_version"] == 5
    assert plan["time_lock"] == "this_registration"
    # the registered plan's power settings, and one proposed law for the study's cell, not the panel's cells'
    effects = plan["assumed_effects"]
    assert {k: effects[k] for k in ("min_power", "replicates", "seed", "scales")} == {
        k: registered["assumed_effects"][k] for k in ("min_power", "replicates", "seed", "scales")
    }
    assert "cells" not in effects and effects["default"]["gap_pp"] == 10.0
    assert effects["default"]["source"].startswith("proposed by cotdyn init")
    from cotdyn.analysis.power import assumed_effects

    assert assumed_effects(plan).laws["smollm2-p"]["coverage"] == 0.5
    assert [h["id"] for h in plan["hypotheses"]] == ["H1", "H2", "H3", "H5"]
    assert all(h["cells"] == ["smollm2-p"] for h in plan["hypotheses"])
    assert {(m["id"], m["cell"]) for m in plan["holm"]["family"]} == {("H1", "smollm2-p"), ("H3", "smollm2-p")}
    assert config["cells"] == config["confirmatory"] == ["smollm2-p"]
    # the content is pinned once, in the plan (issue 38); the config names the file
    pinned = content_sha256(load_benchmark({**config["benchmarks"]["p"], "content_sha256": None}))
    assert plan["panel"]["benchmarks"]["p"] == {"kind": "jsonl", "n": 12, "content_sha256": pinned}
    assert "content_sha256" not in config["benchmarks"]["p"]


# How the embedded default's plan was written (docs/your-study.md, "The embedded default is such a study").
DEFAULT_INIT = (
    "init {out} --jsonl data/additions.jsonl --answer number --id id --benchmark additions "
    "--protocol reference_max_tokens=80 --protocol continuation_max_tokens=40 --min-group-size 5"
)


def test_the_embedded_default_plan_is_what_cotdyn_init_writes_and_is_registered(tmp_path, monkeypatch):
    from cotdyn.cli.main import main
    from cotdyn.plan.registration import check_registered

    monkeypatch.chdir(ROOT)
    out = tmp_path / "default"
    assert main([*DEFAULT_INIT.format(out=out).split(), "--power-reps", "0"]) == 0  # its power: test_power
    example = ROOT / "preregistration" / "examples" / "default"
    assert (out / "plan.yaml").read_bytes() == (example / "plan.yaml").read_bytes()
    check_registered(example / "plan.yaml", example / "REGISTERED")
    written = yaml.safe_load((out / "config.yaml").read_text())
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert default["plan"] == "preregistration/examples/default/plan.yaml"
    assert default["cells"] == default["confirmatory"] == written["cells"] == ["smollm2-additions"]
    assert default["benchmarks"] == written["benchmarks"]
    assert DEFAULT_INIT.format(out="preregistration/examples/default") in DOC.read_text().replace("\n", " ")


def test_the_additions_file_is_made_as_data_readme_says():
    import numpy as np

    pairs = [(a, b) for a in range(1, 10) for b in range(1, 10)]
    order = np.random.default_rng(7).permutation(len(pairs))[:40]
    rows = [{"id": f"add-{a}-{b}", "question": f"What is {a} + {b}?", "gold": str(a + b)} for a, b in
            (pairs[i] for i in order)]  # fmt: skip
    assert (ROOT / "data" / "additions.jsonl").read_text() == "".join(json.dumps(r) + "\n" for r in rows)
