"""The workflow's logic (cotdyn.workflow), which workflow/rules/common.smk calls: unit tests, without
running Snakemake. Snakemake's ``workflow`` object is a stand-in here (the attributes each function
reads of it); tests/test_workflow.py and tests/test_reruns.py run the real thing."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from conftest import DATA, ROOT
from snakemake.exceptions import WorkflowError

from cotdyn.provenance.code import code_hash
from cotdyn.provenance.seal import seal_path, write_seal
from cotdyn.workflow import checks, environments, params, paths, requests, seals, snakemake_fixes, start
from cotdyn.workflow.study import StudyError, check_infogain_traces, read_study

SCHEMA = str(ROOT / "src" / "cotdyn" / "plan" / "config.schema.yaml")
NO_OVERRIDES = SimpleNamespace(config_args=None, config={})


def simulated(tmp_path, **extra) -> dict:
    return {
        "study": "t",
        "plan": str(ROOT / "preregistration" / "plan.yaml"),
        "cache": str(tmp_path / "cache"),
        "cells": ["sim-gsm8k"],
        "models": {"sim": {"backend": "simulated", "chunk_size": 5}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k", "path": str(DATA / "gsm8k_test.jsonl"), "limit": 6}},
        "variants": {
            "registered": {},
            "newline": {"segmentation": "newline"},
            "m4": {"subsample_of": "registered", "m": 4},
        },
        **extra,
    }


def study_of(tmp_path, config: dict, overrides=NO_OVERRIDES, text: str | None = None):
    """The study read as common.smk reads it, from a config file written in ``tmp_path``."""
    path = tmp_path / "study.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(config))
    return read_study(config, [str(path)], overrides, ROOT, SCHEMA)


def job(rule: str, threads: int = 2, **wildcards):
    return SimpleNamespace(rule=SimpleNamespace(name=rule), wildcards=SimpleNamespace(**wildcards), threads=threads)


# --- the study -----------------------------------------------------------------------------------


def test_the_study_is_typed_in_place_and_its_variants_share_what_they_share(tmp_path):
    config = simulated(tmp_path)
    study = study_of(tmp_path, config)
    assert study.config is config and "protocol" in config  # the schema's defaults filled in, in place
    assert study.cell_names == ["sim-gsm8k"] and study.benchmarks == ["gsm8k"]
    assert study.variants == ["registered", "newline", "m4"] and study.generating == ["registered", "newline"]
    assert len(study.references) == 1  # one set of reference settings: one chains file for every variant
    assert study.dir == "results/t" and study.cache == config["cache"] and study.source.endswith("study.yaml")
    assert len(study.plan_sha256) == 64 and study.protocols["m4"]["m"] == 4


def test_config_and_plan_errors_are_one_line_naming_their_source(tmp_path):
    with pytest.raises(StudyError, match=r"^invalid config \(.*study.yaml\): field .*cellz"):
        study_of(tmp_path, simulated(tmp_path, cellz=[]))
    with pytest.raises(StudyError, match=r"^config: .*study.yaml.*study"):
        study_of(tmp_path, simulated(tmp_path), text="study: a\nstudy: b\n")
    with pytest.raises(StudyError, match=r"^plan of .*study.yaml: "):
        study_of(tmp_path, simulated(tmp_path, plan=str(tmp_path / "absent.yaml")))
    with pytest.raises(StudyError, match="unknown segmentation 'paragraph'"):
        study_of(tmp_path, simulated(tmp_path, variants={"registered": {}, "p": {"segmentation": "paragraph"}}))
    with pytest.raises(StudyError) as e:
        study_of(tmp_path, simulated(tmp_path, cells=["nomodel-gsm8k"]))
    assert "\n" not in str(e.value) and "nomodel" in str(e.value)


def test_a_nested_override_is_read_as_yaml_and_an_error_in_it_names_the_override(tmp_path):
    entry = "protocol={continuation_temperature: 0.5}"
    settings = SimpleNamespace(config_args=[entry], config={"protocol": {"continuation_temperature": "0.5"}})
    config = simulated(tmp_path, protocol={"continuation_temperature": "0.5"})  # as Snakemake laid it
    assert study_of(tmp_path, config, settings).config["protocol"]["continuation_temperature"] == 0.5
    bad = "protocol={m: five}"
    settings = SimpleNamespace(config_args=[bad], config={"protocol": {"m": "five"}})
    with pytest.raises(StudyError, match=r"^--config protocol=\{m: five\}: field protocol.m"):
        study_of(tmp_path, simulated(tmp_path, protocol={"m": "five"}), settings)


def test_infogain_traces_need_a_variant_of_the_study_cut_into_steps(tmp_path):
    traces = {"supervisor": {"id": "a-supervisor", "device": "cpu"}}
    study = study_of(tmp_path, simulated(tmp_path, infogain={"traces": {**traces, "variant": "other"}}))
    with pytest.raises(StudyError, match="infogain.traces.variant 'other' is not a variant of"):
        check_infogain_traces(study)
    check_infogain_traces(study_of(tmp_path, simulated(tmp_path)))  # none asked for: nothing to check


# --- the checks before planning --------------------------------------------------------------------


def test_reviewing_command_lines_skip_the_checks_and_others_do_not():
    assert checks.reviewing(["audit"]) and checks.reviewing(["--report", "r.html"])
    assert checks.reviewing(["--report=r.html"]) and not checks.reviewing(["-n", "--cores", "2"])


def test_a_token_budget_and_a_missing_benchmark_file_stop_the_run_in_its_process_only(tmp_path):
    study = study_of(tmp_path, simulated(tmp_path, token_budget=10))
    with pytest.raises(StudyError, match=r"study.yaml: .*token"):
        checks.check_before_planning(study, True, ["-n"])
    checks.check_before_planning(study, False, ["-n"])  # a job's own process: its run checked
    checks.check_before_planning(study, True, ["audit"])  # a reviewer reads the study as it is
    missing = simulated(tmp_path)
    missing["benchmarks"]["gsm8k"]["path"] = str(tmp_path / "gone.jsonl")
    with pytest.raises(StudyError, match=r"benchmarks.gsm8k: .*gone.jsonl"):
        checks.check_local_benchmarks(study_of(tmp_path, missing))


# --- paths and params ------------------------------------------------------------------------------


def test_raw_targets_name_each_generation_once_with_its_seal(tmp_path):
    study = study_of(tmp_path, simulated(tmp_path))
    chains = {paths.chains_file(study, "sim-gsm8k", v) for v in study.variants}
    assert len(chains) == 1  # the variants share the reference settings
    assert paths.samples_file(study, "sim-gsm8k", "m4") == paths.samples_file(study, "sim-gsm8k", "registered")
    raw = paths.raw_targets(study)
    assert {str(seal_path(p)) for p in chains} <= set(raw) and len(raw) == len(set(raw))
    assert sum(p.endswith("samples.parquet") for p in raw) == 2 and sum(p.endswith("records.parquet") for p in raw) == 3
    assert set(raw) <= set(paths.study_targets(study))
    assert paths.infogain_trace_targets(study) == []
    jsonl = paths.samples_jsonl_files(study)  # beside the samples of each generating variant
    samples = sorted(p.removesuffix(".parquet") for p in raw if p.endswith("samples.parquet"))
    assert sorted(p.removesuffix(".jsonl") for p in jsonl) == samples and len(jsonl) == 2


def test_the_preregistration_inputs_take_deviations_only_when_there(tmp_path):
    plan = tmp_path / "prereg" / "plan.yaml"
    plan.parent.mkdir()
    for name in ("plan.yaml", "REGISTERED"):
        (plan.parent / name).write_bytes((ROOT / "preregistration" / name).read_bytes())
    study = study_of(tmp_path, simulated(tmp_path, plan=str(plan)))
    assert paths.preregistration_inputs(study) == [str(plan), str(plan.parent / "REGISTERED")]
    (plan.parent / "deviations.yaml").write_text("deviations: []\n")
    assert paths.preregistration_inputs(study)[-1] == str(plan.parent / "deviations.yaml")


def test_the_model_param_leaves_out_what_no_sample_depends_on(tmp_path):
    config = simulated(tmp_path)
    config["models"]["sim"]["resources"] = {"cpus": 4}
    study = study_of(tmp_path, config)
    model = params.model_for(study, "sim-gsm8k")
    assert not set(params.PERFORMANCE_KEYS) & set(model) and model["backend"] == "simulated"
    assert model["dtype"] == study.protocols["registered"]["dtype"]
    assert params.config_part({"cells": [1], "other": 2}, ("cells", "variants")) == {"cells": [1]}


def test_a_code_hash_is_made_by_the_process_that_records_params_only():
    expected = code_hash(ROOT / "workflow" / "scripts" / "records.py", ROOT / "src")
    scripts = lambda name: ROOT / "workflow" / "scripts" / name  # noqa: E731
    main = SimpleNamespace(is_main_process=True, remote_execution_settings=SimpleNamespace(immediate_submit=False))
    assert params.CodeHashes(main, scripts, ROOT / "src").of("records.py")(None) == expected
    job_process = SimpleNamespace(
        is_main_process=False, remote_execution_settings=SimpleNamespace(immediate_submit=False)
    )
    assert params.CodeHashes(job_process, scripts, ROOT / "src").of("records.py")(None) == params.NOT_HASHED
    immediate = SimpleNamespace(is_main_process=False, remote_execution_settings=SimpleNamespace(immediate_submit=True))
    assert params.CodeHashes(immediate, scripts, ROOT / "src").of("records.py")(None) == expected


# --- seals -----------------------------------------------------------------------------------------


def test_a_changed_raw_file_stops_a_run_warns_a_report_and_passes_a_jobs_process(tmp_path, capsys):
    raw = tmp_path / "samples.parquet"
    pd.DataFrame({"text": ["The answer is 32."]}).to_parquet(raw)
    write_seal(raw, "rev", [("k" * 64, 1)])
    run = SimpleNamespace(is_main_process=True, executor_plugin=object())
    assert seals.Seals(run).sealed(str(raw)) == str(raw)
    raw.write_bytes(raw.read_bytes()[:-8] + b"tampered")
    with pytest.raises(WorkflowError, match=f"^cotdyn: .*{raw.name}"):
        seals.Seals(run).sealed(str(raw))
    assert seals.Seals(SimpleNamespace(is_main_process=True, executor_plugin=None)).sealed(str(raw)) == str(raw)
    assert "cotdyn: WARNING" in capsys.readouterr().err
    assert seals.Seals(SimpleNamespace(is_main_process=False)).sealed(str(raw)) == str(raw)
    wrapped = paths.sealed_files(seals.Seals(run).sealed, lambda cell, variant: str(tmp_path / f"{cell}-{variant}"))
    assert wrapped("c", "v") == str(tmp_path / "c-v")  # not generated yet: it passes


def test_a_damaged_table_is_redated_by_a_run_and_only_named_by_a_dry_run(tmp_path, capsys):
    records = tmp_path / "cells" / "c" / "v" / "records.parquet"
    records.parent.mkdir(parents=True)
    records.write_bytes(b"PAR1 cut short")
    dry = SimpleNamespace(is_main_process=True, executor_plugin=object(), dryrun=True)
    assert seals.DamagedTables(dry, str(tmp_path)).look(None) == []
    assert "writes nothing" in capsys.readouterr().err and records.stat().st_mtime > 0
    looking = seals.DamagedTables(
        SimpleNamespace(is_main_process=True, executor_plugin=object(), dryrun=False), str(tmp_path)
    )
    looking.look(None)
    assert records.stat().st_mtime == 0 and "its rule rebuilds it" in capsys.readouterr().err
    os.utime(records)
    looking.look(None)  # once per run, as it plans
    assert records.stat().st_mtime > 0


# --- cluster requests ------------------------------------------------------------------------------


def test_generation_requests_default_by_device_and_scale_with_the_attempt():
    cpu = requests.generation_request({"backend": "simulated"}, "reference")
    assert cpu == {"cpus": 2, "mem_mb": 8000, "runtime": 240, "gpu": 0, "gpu_model": None, "partition": None}
    asked = {"device": "cuda:0", "resources": {"gpu_model": "h100", "runtime": {"reference": 30}, "partition": "gpu"}}
    gpu = requests.generation_request(asked, "continuations")
    assert (gpu["gpu"], gpu["gpu_model"], gpu["runtime"], gpu["cpus"], gpu["partition"]) == (1, "h100", 360, 8, "gpu")
    assert requests.generation_request(asked, "reference")["runtime"] == 30
    assert [requests.scaled(1000, attempt) for attempt in (1, 2, 3)] == [1000, 1500, 2000]


def test_generation_resources_follow_the_cell_and_name_a_partition_only_when_a_model_does(tmp_path):
    config = simulated(tmp_path)
    study = study_of(tmp_path, config)
    resources = requests.generation_resources(study, "reference")
    w = SimpleNamespace(cell="sim-gsm8k")
    assert "slurm_partition" not in resources and resources["mem_mb"](w, 2) == 12000 and resources["gpu"](w) == 0
    config = simulated(tmp_path)
    config["models"]["sim"]["resources"] = {"partition": "short"}
    assert requests.generation_resources(study_of(tmp_path, config), "reference")["slurm_partition"](w) == "short"


class FakeGroup:
    """A Snakemake group job as the request check reads it: resources computed on first use against
    the run's ``_cores``, as GroupJob does (each component 1 CPU, 2000 MB; all run at once if they fit)."""

    def __init__(self, groupid, n, global_resources):
        self.groupid, self.jobs, self._resources = groupid, [object()] * n, None
        self.global_resources = global_resources

    def is_group(self):
        return True

    @property
    def resources(self):
        if self._resources is None:
            at_once = min(len(self.jobs), self.global_resources["_cores"].value)
            self._resources = {"_cores": at_once, "mem_mb": 2000 * at_once}
        return self._resources

    @property
    def threads(self):
        return self.resources["_cores"]


def slurm_workflow(jobs, cores):
    """A workflow as refuse_requests_no_node_meets reads it: a SLURM run, its DAG, its resources."""
    from snakemake.resources import Resources

    global_resources = Resources()
    global_resources["_cores"] = cores
    jobs = [j(global_resources) if callable(j) else j for j in jobs]
    for j in jobs:
        if not hasattr(j, "is_group"):
            j.is_group, j.is_local = (lambda: False), False
    dag = SimpleNamespace(get_jobs_or_groups=lambda: jobs, needrun=lambda j: True)
    return SimpleNamespace(executor_plugin=SimpleNamespace(name="slurm"), dag=dag, global_resources=global_resources)


def test_a_request_no_node_meets_stops_a_slurm_run_before_submission():
    big = SimpleNamespace(**vars(job("reference", cell="c", ref="r")), resources={"cpus_per_task": 64, "mem_mb": 1000})
    small = SimpleNamespace(**vars(job("records", cell="c", variant="v")), resources={"mem_mb": 1000})
    sinfo = lambda *a, **k: SimpleNamespace(returncode=0, stdout="main*|8|32000|(null)\n", stderr="")  # noqa: E731
    workflow = slurm_workflow([big, small], cores=8)
    problems = requests.unmet_requests(requests.submitted_jobs(workflow.dag), requests.sinfo_nodes(sinfo))
    assert list(problems) and all(what.startswith("rule reference: ") for what in problems)
    with pytest.raises(WorkflowError, match="requests no node can meet"):
        requests.refuse_requests_no_node_meets(workflow, sinfo)
    workflow.executor_plugin = SimpleNamespace(name="local")
    requests.refuse_requests_no_node_meets(workflow, sinfo)  # no cluster, no check
    workflow.executor_plugin = None
    requests.refuse_requests_no_node_meets(workflow, sinfo)
    failing = lambda *a, **k: SimpleNamespace(returncode=1, stdout="", stderr="no slurm")  # noqa: E731
    assert "sinfo said 'no slurm'" in requests.sinfo_nodes(failing)


def test_a_group_job_is_sized_to_the_nodes_and_checked_against_them():
    """The profile's cores (8) is more than the one node has (2 CPUs): held to the node, the grouped
    analysis of 9 components asks for 2 CPUs and 4000 MB, and is submitted; on a node with too little
    memory for even that, the group is named before anything is submitted."""
    node = lambda mem: lambda *a, **k: SimpleNamespace(returncode=0, stdout=f"cpu*|2|{mem}|(null)\\n", stderr="")  # noqa: E731
    workflow = slurm_workflow([lambda r: FakeGroup("analysis", 9, r)], cores=8)
    (group,) = workflow.dag.get_jobs_or_groups()
    assert group.resources["_cores"] == 8  # as Snakemake would size it against the profile's cores
    requests.refuse_requests_no_node_meets(workflow, node(16000))
    assert (group.resources["_cores"], group.resources["mem_mb"]) == (2, 4000)
    workflow = slurm_workflow([lambda r: FakeGroup("analysis", 9, r)], cores=8)
    with pytest.raises(WorkflowError, match=r"group analysis: asks for 2 CPUs, 4000 MB; no node .* \(jobs: 9 jobs\)"):
        requests.refuse_requests_no_node_meets(workflow, node(3000))


# --- environments and the start of a run -------------------------------------------------------------


def test_the_jobs_import_the_checkout_and_its_environments_come_from_the_backend_declaration(tmp_path):
    environ = {"PYTHONPATH": "/elsewhere"}
    environments.use_checkout(tmp_path, environ)
    environments.use_checkout(tmp_path, environ)  # once first is enough
    assert environ == {
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), "/elsewhere"]),
        "COTDYN_ROOT": str(tmp_path),
    }
    assert environments.generation_env({"backend": "simulated"}) == "../../envs/generate-cpu.yaml"
    assert environments.generation_env({"backend": "transformers", "device": "cuda"}) == "../../envs/generate-cuda.yaml"
    assert environments.generation_env({"backend": "vllm", "device": "cuda"}) == "../../envs/generate-vllm.yaml"
    assert environments.infogain_env(None) == "../../envs/generate-cpu.yaml"
    assert environments.infogain_env({"supervisor": {"device": "cuda:1"}}) == "../../envs/generate-cuda.yaml"
    for env in ("generate-cpu", "generate-cuda", "generate-vllm"):
        assert (ROOT / "workflow" / "rules" / environments.env_file(env)).resolve().is_file()


def test_the_start_of_a_run_estimates_its_generation_jobs_only(tmp_path, capsys):
    study = study_of(tmp_path, simulated(tmp_path))
    ref = next(iter(study.references))
    jobs = [job("reference", cell="sim-gsm8k", ref=ref), job("continuations", cell="sim-gsm8k", variant="newline")]
    jobs += [job("records", cell="sim-gsm8k", variant="newline"), SimpleNamespace(rule=SimpleNamespace(name="all"))]
    found = start.generation_jobs(study, jobs)
    assert [(j[0], j[2], j[3]) for j in found] == [
        ("reference", ref, study.references[ref]),
        ("continuations", "newline", study.protocols["newline"]),
    ]
    workflow = SimpleNamespace(dag=SimpleNamespace(needrun_jobs=lambda: jobs), executor_plugin=None)
    start.start_of_run(study, workflow)
    out = capsys.readouterr().out
    assert "the paths of this run, resolved" in out and str(Path(study.cache).resolve()) in out


# --- Snakemake's own faults, corrected while they are there ------------------------------------------


def test_a_params_comparison_names_a_file_only_when_its_params_changed():
    from snakemake.persistence import ParamsChange

    snakemake_fixes.list_only_changed_params()  # as common.smk does; a second call finds nothing to correct
    assert not snakemake_fixes.params_union_keeps_unchanged_files()
    assert snakemake_fixes.list_only_changed_params() is False
    unchanged, changed = ParamsChange(files={"same"}), ParamsChange(only_new={"'x'"}, files={"new"})
    assert list(ParamsChange() | unchanged) == [] and list(unchanged | unchanged) == []
    assert list(unchanged | changed) == ["new"] and list(changed | unchanged) == ["new"]
    both = changed | ParamsChange(only_old={"'y'"}, files={"old"})
    assert set(both) == {"new", "old"} and both.only_old == {"'y'"} and both.only_new == {"'x'"}


def test_a_limited_study_holds_no_cell_confirmatory_when_the_workflow_is_read(tmp_path):
    """A study under `limit:` is descriptive (plan.config.confirmatory_cells): a cell it lists as
    confirmatory, run off the registered protocol, is a deviation only where the study is not limited."""
    config = simulated(tmp_path, confirmatory=["sim-gsm8k"], protocol={"m": 4})
    with pytest.raises(StudyError, match="deviation"):
        checks.check_plan_drift(study_of(tmp_path, config))
    checks.check_plan_drift(
        study_of(tmp_path, simulated(tmp_path, confirmatory=["sim-gsm8k"], protocol={"m": 4}, limit=2))
    )


def test_a_git_source_joins_a_rules_script_as_the_code_trigger_asks():
    from snakemake.sourcecache import GithubFile, LocalGitFile, LocalSourceFile

    snakemake_fixes.join_source_files_in_git_sources()  # as common.smk does; a second call finds nothing to correct
    assert not snakemake_fixes.git_sources_refuse_source_files()
    assert snakemake_fixes.join_source_files_in_git_sources() is False
    script = LocalSourceFile("../scripts/records.py")
    local = LocalGitFile("/repo", "workflow/rules", tag="v0.1.0").join(script)
    assert (local.path, local.tag) == ("workflow/scripts/records.py", "v0.1.0")
    hosted = GithubFile("owner/cotdyn", "workflow/rules", tag="v0.1.0").join(script)
    assert (hosted.path, hosted.repo) == ("workflow/scripts/records.py", "owner/cotdyn")
    assert LocalGitFile("/repo", "workflow/rules", tag="v0.1.0").join("x.py").path == "workflow/rules/x.py"
