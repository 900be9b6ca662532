# Helpers shared by every stage: config validation, cells, variants, paths.
import functools
import os
import sys
from pathlib import Path

# This checkout, the folder above workflow/: workflow.current_basedir is this file's own folder, also
# where another Snakefile uses this workflow as a module (there workflow.basedir is that Snakefile's).
WORKFLOW_ROOT = Path(str(workflow.current_basedir)).parents[1]
# One import path for the run and its jobs: the checkout's src/ first, here and (by PYTHONPATH, which
# every job's process inherits, on a cluster too) in each job, so both run the code beside the
# Snakefile, the code its rules' code hashes (code_of) follow, not whatever cotdyn is installed.
SRC = WORKFLOW_ROOT / "src"
sys.path.insert(0, str(SRC))
if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != str(SRC):
    # set, not read: no envvars directive (which asserts a variable the user must define)
    os.environ.update(PYTHONPATH=os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]))
# envs/*.yaml install cotdyn and take the lock from ${COTDYN_ROOT} (pip expands it): conda runs pip
# beside a copy of the env file under .snakemake/conda/, where a relative `..` is not this checkout.
os.environ.update(COTDYN_ROOT=str(WORKFLOW_ROOT))  # set here, not asked of the user (no envvars:)
from snakemake.utils import update_config

from cotdyn.files import layout
from cotdyn.generation.backends import registry as backend_registry
from cotdyn.plan.config import (
    ConfigError,
    check_study_wide,
    command_line_overrides,
    override_source,
    cut_answers,
    protocol_for,
    reference_id,
    resolve_cells,
    samples_variant,
    with_bundled_paths,
)
from cotdyn.files.layout import ANALYSIS_FILES, PLAN_CHECK, STUDY_MANIFEST
from cotdyn.plan.registration import sibling_paths
from cotdyn.protocol.signals import caption_list, registered_signals
from cotdyn.plan.schema import validate_config, validate_plan
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import PLAN_CHECK_KEYS, plan_check
from cotdyn.provenance.code import code_hash
from cotdyn.provenance.seal import SealError, check_sealed, seal_path, unreadable_tables
from cotdyn.report.secondary_tables import has_secondary

CONFIG_SOURCE = ", ".join(str(f) for f in getattr(workflow, "configfiles", [])) or "config"

from cotdyn.files.strict import UntrustedFileError, read_yaml

# Snakemake reads each config file itself, and a key written twice there wins by position; each is
# read again strictly (cotdyn.files.strict: no key twice, no alias bomb, bounded), at every run and
# dry run, so such a file stops the run by name (issue 48).
for _configfile in getattr(workflow, "configfiles", []):
    try:
        read_yaml(_configfile)
    except UntrustedFileError as e:
        raise WorkflowError(f"config: {e}") from None


# --config values, read as YAML: Snakemake reads a nested one (`protocol={m: 3}`) into strings only
# ('3'); each is read again, strictly (a key twice is refused), and laid over the config where
# Snakemake laid its strings (cotdyn.plan.config.command_line_overrides). A schema error in a field
# an override set names the override, not the config file.
try:
    OVERRIDES = command_line_overrides(
        getattr(workflow.config_settings, "config_args", None), dict(getattr(workflow.config_settings, "config", {}))
    )
except ConfigError as e:
    raise WorkflowError(str(e)) from None
update_config(config, {key: value for key, (_, value) in OVERRIDES.items()})
# the schema with the backend registry's names and options blocks filled in (cotdyn.generation.backends.registry)
CONFIG_SCHEMA = workflow.source_path("../schemas/config.schema.yaml")
# the bundled plan and data of a relative path the working directory lacks (a deployment's folder)
config.update(with_bundled_paths(dict(config), WORKFLOW_ROOT))

# the one validation of every config (cotdyn.plan.schema): the audit applies it to a manifest's config
try:
    with backend_registry.schema_file(CONFIG_SCHEMA) as _schema:
        validate_config(
            config,
            f"invalid config ({CONFIG_SOURCE})",
            _schema,
            lambda path: override_source(OVERRIDES, path, f"invalid config ({CONFIG_SOURCE})"),
        )
except ConfigError as e:
    raise WorkflowError(str(e)) from None

PLAN_PATH = config["plan"]
try:
    PLAN = load_plan(PLAN_PATH)
except (ValueError, FileNotFoundError) as e:
    raise WorkflowError(f"plan of {CONFIG_SOURCE}: {e}") from None
try:  # the plan's protocol typed and in range (an `m: five` never reaches a job)
    validate_plan(PLAN, f"plan {PLAN_PATH}")
except ConfigError as e:
    raise WorkflowError(str(e)) from None
PLAN_SHA256 = plan_sha256(PLAN_PATH)
# the plan's REGISTERED and deviations.yaml, strictly, at every run, whether check_plan reruns or not
for _sibling in sibling_paths(PLAN_PATH):
    if os.path.lexists(_sibling):
        try:
            read_yaml(_sibling)
        except UntrustedFileError as e:
            raise WorkflowError(f"plan of {CONFIG_SOURCE}: {e}") from None
STUDY_DIR = f"results/{config['study']}"
CACHE_DIR = config["cache"]
try:
    CELL_SPECS = resolve_cells(config, PLAN, CONFIG_SOURCE)
    for _cell in CELL_SPECS.values():
        backend_registry.check_entry(_cell.model, f"{CONFIG_SOURCE}: model '{_cell.model_key}'")
    VARIANTS = list(config["variants"])
    PROTOCOLS = {v: protocol_for(config, PLAN, v, CONFIG_SOURCE) for v in VARIANTS}
    CUT_ANSWERS = {v: cut_answers(config, v, CONFIG_SOURCE) for v in VARIANTS}
    check_study_wide(PROTOCOLS, CONFIG_SOURCE)
except (ConfigError, ValueError) as e:
    raise WorkflowError(str(e)) from None
CELLS = list(CELL_SPECS)

BENCHMARKS = sorted({c.benchmark_key for c in CELL_SPECS.values()})
MODELS = sorted({c.model_key for c in CELL_SPECS.values()})
REFERENCES = {reference_id(p): p for p in PROTOCOLS.values()}

# Reviewing a study (`snakemake audit`, `--report`) reads a drifted plan to name the drift; anything
# else stops before planning. The command line is read, as in report.smk: Snakemake 9.27 sets the
# targets on `workflow` only after the Snakefile is read (api.DAGApi, workflow.dag_settings).
REVIEWING = any(arg in ("audit", "audit_result", "--report") or arg.startswith("--report=") for arg in sys.argv[1:])
if workflow.is_main_process and not REVIEWING:
    # Plan drift (an edited plan, an undeclared deviation of a confirmatory cell), refused as the
    # workflow is read, at a dry run too, naming the study's own plan and deviations.yaml; the
    # check_plan job repeats it and records the result (cotdyn.plan.registration.plan_check).
    try:
        plan_check(PLAN_PATH, CELLS, list(config.get("confirmatory", [])), PROTOCOLS, PLAN)
    except ValueError as e:  # PreregistrationError, and a token or time lock that does not hold
        raise WorkflowError(f"plan of {CONFIG_SOURCE}: {e}") from None
    # each local benchmark file's rows, as the problems job reads them (cotdyn.dataset.benchmarks)
    from cotdyn.dataset.benchmarks import BenchmarkError, check_local_rows

    for _key in BENCHMARKS:
        try:
            check_local_rows(next(c.benchmark for c in CELL_SPECS.values() if c.benchmark_key == _key))
        except BenchmarkError as e:
            raise WorkflowError(f"{CONFIG_SOURCE}: benchmarks.{_key}: {e}") from None
        except OSError as e:
            raise WorkflowError(f"{CONFIG_SOURCE}: benchmarks.{_key}: {e.filename}: {e.strerror or e}") from None
    # the generation's upper bound against the study's token budget (cotdyn.generation.announce)
    from cotdyn.generation.announce import BudgetError, check_token_budget, registered_sizes

    try:
        check_token_budget(
            config["study"],
            CELL_SPECS,
            PROTOCOLS,
            [v for v in VARIANTS if samples_variant(config, v) == v],
            registered_sizes(PLAN),
            config.get("token_budget"),
        )
    except BudgetError as e:
        raise WorkflowError(f"{CONFIG_SOURCE}: {e}") from None


wildcard_constraints:
    cell="|".join(CELLS),
    variant="|".join(VARIANTS),
    benchmark="|".join(BENCHMARKS),
    ref="[A-Za-z0-9_.-]+",


@functools.cache
def script_code_hash(script):
    # Only the run's own process records a job's params (.snakemake/metadata; a job's process also
    # under --immediate-submit): a job's process, which never compares them, skips the parsing.
    if not (workflow.is_main_process or getattr(workflow.remote_execution_settings, "immediate_submit", False)):
        return "recorded by the run's process"
    return code_hash(WORKFLOW_ROOT / "workflow" / "scripts" / script, SRC)


def code_of(script):
    """A rule's code trigger, a param: the hash of workflow/scripts/<script> and of every cotdyn module
    it imports (cotdyn.provenance.code), normalised so that comments and docstrings do not count.
    The profiles drop Snakemake's own `code` trigger (a script's mtime); docs/developer-notes.md.
    Computed when a job of the rule is planned, once per script."""
    return lambda wildcards: script_code_hash(script)


def config_part(keys):
    """The parts of the config a rule reads, as its param (a config edit elsewhere, a performance
    knob such as a model's chunk_size, leaves the rule's jobs and the jobs below them alone)."""
    return {k: config[k] for k in keys if k in config}


PLAN_CHECK_CONFIG = config_part(PLAN_CHECK_KEYS)


def study_targets():
    """Every final output of the study but its manifest (cotdyn.files.layout.study_targets), and its
    raw data (raw_targets)."""
    return raw_targets() + [
        f"{STUDY_DIR}/{path}"
        for path in layout.study_targets(
            CELLS,
            VARIANTS,
            has_secondary(PLAN),
            bool(config.get("dynamics_comparisons")),
            bool(config.get("infogain", {}).get("traces")),
        )
    ]


def report_targets():
    """The audit's result, every variant's report pages and the grading page (cotdyn.files.layout.report_targets)."""
    return [f"{STUDY_DIR}/{path}" for path in layout.report_targets(VARIANTS, CELLS)]


def exploratory_item(name, kind):
    """An exploratory output of a variant, flagged for the study report with its caption."""
    stem = name.rsplit(".", 1)[0]
    return report(
        f"{STUDY_DIR}/analysis/{{variant}}/exploratory/{name}",
        caption=f"../report/exploratory_{name.replace('.', '_')}.rst",
        category="2. Exploratory analyses",
        subcategory="{variant}",
        labels={"variant": "{variant}", "kind": kind, "output": stem},
    )


def secondary_item(folder, name, kind, subcategory):
    """A table of seed 003's further analyses, flagged for the study report with its caption."""
    return report(
        f"{folder}/{name}",
        caption=f"../report/secondary_{name.replace('.', '_')}.rst",
        category="2. Exploratory analyses",
        subcategory=subcategory,
        labels={"variant": subcategory, "kind": kind, "output": name.rsplit(".", 1)[0]},
    )


# Model entry keys no sample depends on: the cluster request (the scheduler's, not the backend's) and
# chunk_size (how requests are grouped into cache shards; a resumed or re-chunked run reads the same
# samples from the cache). Left out of the generation rules' params, so editing them reruns nothing;
# a generation job reads chunk_size from the config itself (workflow/scripts/reference.py).
PERFORMANCE_KEYS = ("resources", "chunk_size")


def model_for(cell):
    """The cell's model entry as the backend sees it (PERFORMANCE_KEYS left out), pointing at the
    converted weights when it ships as GGUF."""
    spec = CELL_SPECS[cell]
    model = {k: v for k, v in spec.model.items() if k not in PERFORMANCE_KEYS}
    model["dtype"] = PROTOCOLS[VARIANTS[0]]["dtype"]
    if "gguf" in model:
        model["id"] = f"results/models/{spec.model_key}"
    return model


def model_inputs(wildcards):
    spec = CELL_SPECS[wildcards.cell]
    return [f"results/models/{spec.model_key}/SOURCE"] if "gguf" in spec.model else []


def chains_file(cell, variant):
    return f"{STUDY_DIR}/{layout.reference_file(cell, reference_id(PROTOCOLS[variant]), 'chains.parquet')}"


def samples_file(cell, variant):
    return f"{STUDY_DIR}/{layout.variant_file(cell, samples_variant(config, variant), 'samples.parquet')}"


_SEALED = set()


def sealed(path):
    """``path``, once its seal shows generation wrote it (cotdyn.provenance.seal): every rule reading
    chains or samples takes them through here, so a tampered file stops the run, named, before
    any job derives from it. A file not there yet passes (it is generated)."""
    if not workflow.is_main_process:  # a job's own process: the run checked when it planned, the script checks
        return path
    stats = tuple(p.stat().st_mtime_ns if p.exists() else None for p in (Path(path), seal_path(path)))
    if stats[0] is not None and (path, stats) not in _SEALED:
        try:
            check_sealed(path)
        except SealError as e:
            if getattr(workflow, "executor_plugin", None) is None:  # --report and the like run no job: warn
                print(f"cotdyn: WARNING: {e}", file=sys.stderr)
                return path
            raise WorkflowError(f"cotdyn: {e}") from None
        _SEALED.add((path, stats))
    return path


def chains_path(cell, variant):
    """A cell's chains under a variant, seal checked (sealed)."""
    return sealed(chains_file(cell, variant))


def samples_path(cell, variant):
    """The samples a cell's variant reads, seal checked (sealed)."""
    return sealed(samples_file(cell, variant))


GENERATING = [v for v in VARIANTS if samples_variant(config, v) == v]


def raw_targets():
    """Every cell's chains, samples and their seals, and every variant's records: study targets, so
    a deleted one is regenerated (from the cache) instead of silently missing."""
    raw = {chains_file(c, v) for c in CELLS for v in VARIANTS} | {samples_file(c, v) for c in CELLS for v in GENERATING}
    records = [f"{STUDY_DIR}/{layout.variant_file(c, v, 'records.parquet')}" for c in CELLS for v in VARIANTS]
    return sorted(raw | {str(seal_path(p)) for p in raw}) + records


_DAMAGED_LOOKED_FOR = []


def rebuild_damaged_tables(wildcards):
    """An input function of the records rule that adds no input. On its first call, as the run plans,
    a derived table a kill or a careless hand left unreadable (cotdyn.provenance.seal.unreadable_tables)
    is dated back to the epoch, older than its inputs, so its rule rebuilds it. Only a run that
    executes jobs does so; a dry run (or --summary, --report) writes nothing and names the table."""
    if workflow.is_main_process and not _DAMAGED_LOOKED_FOR:
        _DAMAGED_LOOKED_FOR.append(True)
        executes = workflow.executor_plugin is not None and not workflow.dryrun
        for damaged, why in unreadable_tables(STUDY_DIR):
            then = "its rule rebuilds it" if executes else "a run (not this one, which writes nothing) rebuilds it"
            print(f"cotdyn: {damaged} is damaged ({why}); {then}", file=sys.stderr)
            if executes:
                os.utime(damaged, (0, 0))
    return []


def is_gpu(cell):
    return CELL_SPECS[cell].model.get("device", "cpu").startswith("cuda")


# What a generation job asks a cluster for (docs/cluster.md): the model entry's `resources`, else
# these defaults, by where the model runs; runtime in minutes, per phase. A GPU (and the entry's
# gpu_model) only for a model on CUDA: the rules decide, the SLURM profile does not override them.
# threads stay 2 (the intra-op threads the samples were produced with); cpus is the allocation.
GENERATION_REQUESTS = {
    "cpu": {"cpus": 2, "mem_mb": 8000, "runtime": {"reference": 240, "continuations": 240}},
    "cuda": {"cpus": 8, "mem_mb": 64000, "runtime": {"reference": 120, "continuations": 360}},
}


def generation_request(cell, phase):
    """The cell's generation request in ``phase``: cpus, mem_mb, runtime, gpu, gpu_model, partition."""
    asked = CELL_SPECS[cell].model.get("resources", {})
    cuda = is_gpu(cell)
    defaults = GENERATION_REQUESTS["cuda" if cuda else "cpu"]
    runtime = asked.get("runtime", {})
    if isinstance(runtime, dict):
        runtime = runtime.get(phase, defaults["runtime"][phase])
    return {
        "cpus": asked.get("cpus", defaults["cpus"]),
        "mem_mb": asked.get("mem_mb", defaults["mem_mb"]),
        "runtime": runtime,
        "gpu": 1 if cuda else 0,
        "gpu_model": asked.get("gpu_model") if cuda else None,
        "partition": asked.get("partition"),
    }


def scaled(request, attempt):
    """A memory or time request on the job's ``attempt``: 1x, 1.5x, 2x (retries: 2), so a job killed
    for memory or time asks for more when it is submitted again. The SLURM profile's
    default-resources write the same rule as an expression (`1000 * (attempt + 1)` for 2000 MB)."""
    return request * (attempt + 1) // 2


def generation_resources(phase):
    """The ``resources`` of a generation rule, memory and time scaled by the attempt (scaled). A
    request left unset (None) is dropped by Snakemake; slurm_partition is a resource only when some
    model names a partition, so that otherwise the plugin picks the partition (profiles/slurm)."""
    resources = {
        "gpu": lambda w: generation_request(w.cell, phase)["gpu"],
        "gpu_model": lambda w: generation_request(w.cell, phase)["gpu_model"],
        "cpus_per_task": lambda w: generation_request(w.cell, phase)["cpus"],
        "mem_mb": lambda w, attempt: scaled(generation_request(w.cell, phase)["mem_mb"], attempt),
        "runtime": lambda w, attempt: scaled(generation_request(w.cell, phase)["runtime"], attempt),
    }
    if any("partition" in m.get("resources", {}) for m in config["models"].values()):
        resources["slurm_partition"] = lambda w: generation_request(w.cell, phase)["partition"]
    return resources


def refuse_requests_no_node_meets(jobs):
    """On a SLURM run, stop before the first submission when a job asks for more than any node of its
    partition has (SLURM would leave it pending for ever, Reason=PartitionConfig)."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    import subprocess

    from cotdyn.plan.cluster import SINFO_FORMAT, parse_sinfo, unmet

    try:
        sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"cannot check the jobs' requests against the nodes: {e}")
        return
    nodes = parse_sinfo(sinfo.stdout)
    if sinfo.returncode != 0 or not nodes:
        print(f"cannot check the jobs' requests against the nodes: sinfo said {sinfo.stderr.strip()!r}")
        return
    problems = {}
    for job in jobs:
        r = job.resources
        request = {"cpus": r.get("cpus_per_task") or job.threads, "mem_mb": r.get("mem_mb"), "gpu": r.get("gpu")}
        request["gpu_model"] = r.get("gpu_model")
        why = unmet(request, r.get("slurm_partition"), nodes)
        if why:
            # joined, not an f-string: the linter takes the word followed by a name and a colon for a rule
            label = " ".join(["rule", job.rule.name])
            problems.setdefault(f"{label}: {why}", []).append(str(job.wildcards))
    if problems:
        lines = [f"{what} (jobs: {', '.join(sorted(set(w))[:4])})" for what, w in problems.items()]
        raise WorkflowError(
            "requests no node can meet (they would pend for ever); lower them in the model entry's "
            "`resources` or the profile (docs/cluster.md):\n  " + "\n  ".join(lines)
        )


def torch_env(device):
    """The environment of a job that runs torch on ``device``: the CUDA build on a GPU."""
    return "../../envs/generate-cuda.yaml" if str(device).startswith("cuda") else "../../envs/generate-cpu.yaml"


def generation_env(wildcards):
    """The conda environment of a generation job: the one its backend's declaration names (vLLM's for
    a vllm model, else torch's for its device)."""
    model = CELL_SPECS[wildcards.cell].model
    envs = {  # cotdyn.generation.backends.registry.ENVIRONMENTS
        "generate-cpu": "../../envs/generate-cpu.yaml",
        "generate-cuda": "../../envs/generate-cuda.yaml",
        "generate-vllm": "../../envs/generate-vllm.yaml",
    }
    return envs[backend_registry.spec(model["backend"]).environment(model)]


def preregistration_inputs(wildcards):
    """plan.yaml, REGISTERED and (when present) deviations.yaml: a change to any re-runs the check."""
    registered, deviations = sibling_paths(PLAN_PATH)
    return [PLAN_PATH, str(registered)] + ([str(deviations)] if deviations.exists() else [])


def generation_logs(cell):
    logs = {v: f"{STUDY_DIR}/cells/{cell}/{v}/generation.json" for v in GENERATING}
    for v in GENERATING:
        ref = Path(chains_path(cell, v)).parent
        logs[f"reference/{ref.name}"] = str(ref / "generation.json")
    return logs


# Seed 000 on the study's own traces (workflow/rules/infogain.smk), when the config has infogain.traces.
INFOGAIN_TRACES = config.get("infogain", {}).get("traces")
IG_DIR = f"{STUDY_DIR}/infogain/traces"
if INFOGAIN_TRACES:
    IG_VARIANT = INFOGAIN_TRACES.get("variant", "registered")
    if IG_VARIANT not in VARIANTS:
        raise WorkflowError(f"infogain.traces.variant '{IG_VARIANT}' is not a variant of {CONFIG_SOURCE}")
    if PROTOCOLS[IG_VARIANT]["checkpoints"] != "steps":
        raise WorkflowError(f"infogain.traces.variant '{IG_VARIANT}' must use step checkpoints ({CONFIG_SOURCE})")


def infogain_env():
    """The conda environment of infogain_cell: torch's, for the supervisor's device. Called as the
    workflow is read, so that infogain_cell's environment is a path, not a function, which
    `--containerize` refuses where the job is not planned (a study without infogain.traces)."""
    return torch_env(INFOGAIN_TRACES["supervisor"].get("device", "cpu") if INFOGAIN_TRACES else "cpu")


def infogain_trace_targets():
    """The cross-cell information-gain tables, when the config asks for them (also study targets)."""
    return [f"{STUDY_DIR}/{path}" for path in layout.INFOGAIN_TRACE_FILES] if INFOGAIN_TRACES else []


def given_paths():
    """The paths a run reads or writes, resolved: the study folder it writes, the cache it shares, the
    plan and every benchmark file it reads (they may point anywhere; nothing is written outside the
    study folder, the cache and the logs)."""
    paths = {"study": STUDY_DIR, "cache": CACHE_DIR, "plan": PLAN_PATH}
    paths |= {f"data {k}": b["path"] for k, b in sorted(config["benchmarks"].items()) if b.get("path")}
    return [f"  {name}: {Path(path).resolve()}" for name, path in paths.items()]


def start_of_run():
    """What a run prints before its first job (the paths, what it will generate and how long that
    should take) and the SLURM request check. The onstart below calls it; a deployment's Snakefile,
    which uses this workflow as a module, calls it from its own onstart (Snakemake runs only the main
    Snakefile's): `onstart: cotdyn.start_of_run()` (docs/deployment.md)."""
    from cotdyn.generation.announce import registered_sizes, run_summary

    print("\n".join(["cotdyn: the paths of this run, resolved:", *given_paths()]))
    refuse_requests_no_node_meets([job for job in workflow.dag.needrun_jobs() if job.rule.name != "all"])

    # the generation jobs this run will execute, with the threads Snakemake gives each (OMP_NUM_THREADS)
    generation_jobs = [
        (
            job.rule.name,
            job.wildcards.cell,
            job.wildcards.ref if job.rule.name == "reference" else job.wildcards.variant,
            REFERENCES[job.wildcards.ref] if job.rule.name == "reference" else PROTOCOLS[job.wildcards.variant],
            job.threads,
        )
        for job in workflow.dag.needrun_jobs()
        if job.rule.name in ("reference", "continuations")
    ]
    print(
        "\n".join(
            run_summary(
                config["study"],
                CELL_SPECS,
                PROTOCOLS[VARIANTS[0]],
                CACHE_DIR,
                registered_sizes(PLAN),
                generation_jobs,
                # with chunk_size, as the jobs run it: the timing ledger keys on it
                {
                    cell: {**model_for(cell), "chunk_size": CELL_SPECS[cell].model.get("chunk_size", 0)}
                    for cell in CELLS
                },
            )
        )
    )


onstart:
    start_of_run()
