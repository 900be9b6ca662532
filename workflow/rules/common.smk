# Glue shared by every stage: the study, its paths and the rules' helpers. The logic lives in the
# package (cotdyn.workflow, tested and linted); this file hands it what only a Snakefile has.
import sys
from functools import partial
from pathlib import Path

from snakemake.sourcecache import LocalSourceFile

# The checkout the rules were read from (the folder above workflow/; workflow.current_basedir is this
# file's own folder, also where another Snakefile uses this workflow as a module), or None where a
# deployed study's module reads them from a release's git tag (docs/deployment.md): then the
# installed cotdyn runs, and nothing is read from beside the study.
CHECKOUT = (
    Path(str(workflow.current_basedir)).parents[1] if isinstance(workflow.current_basedir, LocalSourceFile) else None
)
if CHECKOUT is not None and not (CHECKOUT / "src" / "cotdyn").is_dir():
    CHECKOUT = None  # a copy of workflow/ alone: the installed cotdyn
# The checkout's src/ first, here and (PYTHONPATH) in every job: the code the rules' code hashes follow.
if CHECKOUT is not None:
    sys.path.insert(0, str(CHECKOUT / "src"))
from cotdyn.files import layout
from cotdyn.files.layout import ANALYSIS_FILES, PLAN_CHECK, STUDY_MANIFEST
from cotdyn.plan.config import BUNDLED, samples_variant
from cotdyn.plan.registration import PLAN_CHECK_KEYS
from cotdyn.plan.schema import SCHEMA
from cotdyn.protocol.signals import caption_list, registered_signals, study_signals
from cotdyn.provenance.seal import seal_path
from cotdyn.workflow import environments, params, paths, requests, seals, snakemake_fixes, start
from cotdyn.workflow.checks import check_before_planning
from cotdyn.workflow.study import StudyError, check_infogain_traces, read_study

if CHECKOUT is not None:
    environments.use_checkout(CHECKOUT)  # PYTHONPATH and COTDYN_ROOT, which the jobs inherit
elif environments.in_conda_envs(workflow):
    raise WorkflowError(
        "--sdm conda: the environments (envs/*.yaml) install cotdyn from a checkout, and this workflow "
        "is read from a git tag; run in the environment cotdyn is installed in (docs/deployment.md)"
    )
snakemake_fixes.list_only_changed_params()  # `--list-changes params` lists what changed, only
snakemake_fixes.join_source_files_in_git_sources()  # the code trigger of a workflow read from a git tag
try:  # the config typed and the plan read (cotdyn.workflow.study), then the checks before planning
    STUDY = read_study(
        config,
        getattr(workflow, "configfiles", []),
        workflow.config_settings,
        BUNDLED,
        SCHEMA,
    )
    check_before_planning(STUDY, workflow.is_main_process, sys.argv[1:], environments.in_conda_envs(workflow))
    check_infogain_traces(STUDY)
except StudyError as e:
    raise WorkflowError(str(e)) from None
CONFIG_SOURCE, STUDY_DIR, CACHE_DIR = STUDY.source, STUDY.dir, STUDY.cache
PLAN, PLAN_PATH, PLAN_SHA256 = STUDY.plan, STUDY.plan_path, STUDY.plan_sha256
CELL_SPECS, CELLS, VARIANTS, BENCHMARKS = STUDY.cells, STUDY.cell_names, STUDY.variants, STUDY.benchmarks
PROTOCOLS, REFERENCES, CUT_ANSWERS, GENERATING = STUDY.protocols, STUDY.references, STUDY.cut_answers, STUDY.generating
PLAN_CHECK_CONFIG = params.config_part(config, PLAN_CHECK_KEYS)
INFOGAIN_TRACES, IG_VARIANT, IG_DIR = STUDY.infogain_traces, STUDY.infogain_variant, f"{STUDY_DIR}/infogain/traces"


wildcard_constraints:
    cell="|".join(CELLS),
    variant="|".join(VARIANTS),
    benchmark="|".join(BENCHMARKS),
    ref="[A-Za-z0-9_.-]+",


# Helpers the rules call (each documented where it is defined, in cotdyn.workflow).
# a rule's code param: its script's hash (the script through the source cache: a tag's is no local file)
code_of = params.CodeHashes(workflow, lambda script: workflow.source_path(f"../scripts/{script}"), params.SOURCE).of
model_for, model_inputs = partial(params.model_for, STUDY), partial(paths.model_inputs, STUDY)
chains_file, samples_file = partial(paths.chains_file, STUDY), partial(paths.samples_file, STUDY)
sealed = seals.Seals(workflow).sealed  # a raw file, its seal checked as the run plans
chains_path, samples_path = paths.sealed_files(sealed, chains_file), paths.sealed_files(sealed, samples_file)
study_targets, report_targets = partial(paths.study_targets, STUDY), partial(paths.report_targets, STUDY)
infogain_trace_targets = partial(paths.infogain_trace_targets, STUDY)
preregistration_inputs = partial(paths.preregistration_inputs, STUDY)
generation_logs = partial(paths.generation_logs, STUDY, chains_path)
samples_jsonl_files = partial(paths.samples_jsonl_files, STUDY)
rebuild_damaged_tables = seals.DamagedTables(workflow, STUDY_DIR).look  # an input function adding none
generation_resources = partial(requests.generation_resources, STUDY)


def generation_env(wildcards):
    """Its backend's environment (envs/generate-cpu.yaml, envs/generate-cuda.yaml, envs/generate-vllm.yaml)."""
    return environments.generation_env(CELL_SPECS[wildcards.cell].model)


def infogain_env():
    """Torch's for the supervisor's device (envs/generate-cpu.yaml, envs/generate-cuda.yaml): called as
    the workflow is read, so that `--containerize` gets a path, not a function."""
    return environments.infogain_env(INFOGAIN_TRACES)


def exploratory_item(name, kind):
    return report(**paths.exploratory_item(STUDY, name, kind))  # flagged for the study report


def secondary_item(folder, name, kind, subcategory):
    return report(**paths.secondary_item(folder, name, kind, subcategory))  # flagged for the study report


def start_of_run():
    """The paths, the SLURM request check and the estimate; a deployment's Snakefile calls it from its
    own onstart (`onstart: cotdyn.start_of_run()`, docs/deployment.md)."""
    start.start_of_run(STUDY, workflow)


onstart:
    start_of_run()
