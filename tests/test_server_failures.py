"""Every way a served model can fail ends a generation job in one named line, no traceback (issue 50):
a wrong model name, HTTP 4xx and 5xx, an answer that is not JSON, a server gone mid-run (refused
connections, or silent like a SIGTERM'd llama-server), no server at all. Against the fake server
(tests/fake_openai_server.py), through the generation entry point the rules call
(cotdyn.generation.run.run_reference under cotdyn.generation.failures.one_line_failures, as
workflow/scripts/reference.py calls it), and through that script itself in a fresh process."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from fake_openai_server import SERVED, FakeServer

from cotdyn.dataset.benchmarks import load_benchmark, problems_table
from cotdyn.generation.backends import openai_transport
from cotdyn.generation.failures import one_line_failures
from cotdyn.generation.run import run_reference
from cotdyn.plan.load import effective_protocol

CELL = "served-gsm8k"


@pytest.fixture(scope="module")
def problems(data_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "problems.parquet"
    table = problems_table(load_benchmark({"kind": "gsm8k", "path": str(data_dir / "gsm8k_test.jsonl"), "limit": 3}))
    table.to_parquet(path, index=False)
    return path


def model_entry(url: str, tokenizer_dir, dialect: str = "llama.cpp", served: str = SERVED, **options) -> dict:
    block = {"base_url": url, "model": served, "server": dialect, "retries": 1, "backoff_s": 0.0, "timeout_s": 60.0}
    block |= options
    return {"backend": "openai_compat", "id": str(tokenizer_dir), "revision": "rev-1", "openai_compat": block}


def closed_port_url() -> str:
    """An address on which nothing listens: its connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def failure_of(problems, plan, tmp_path, entry: dict) -> str:
    """The one line a reference job ends with against ``entry``'s server."""
    protocol = effective_protocol(plan)
    with pytest.raises(SystemExit) as ended, one_line_failures(f"reference of {CELL}"):
        run_reference(
            problems, entry, protocol, CELL, "gsm8k", tmp_path / "cache", tmp_path / "c.parquet", tmp_path / "g.json"
        )
    line = str(ended.value.code)
    assert "\n" not in line and line.startswith(f"reference of {CELL}: "), line
    return line


SERVERS = {  # failure -> (fake server's settings, entry's settings, what the line must name)
    "wrong model": ({}, {"served": "other-model"}, f"serves {SERVED}, not 'other-model'"),
    "HTTP 500": ({"fail_first": 99, "fail_status": 500}, {}, r"no answer after 2 tries \(last: HTTP 500"),
    "HTTP 400": ({"rejects": {"min_p"}}, {}, "HTTP 400: .*unsupported field: min_p"),
    "HTTP 404 (vLLM's path on llama-server)": ({}, {"dialect": "vllm", "url_path": "/nowhere"}, "HTTP 404"),
    "malformed JSON": ({"malformed": True}, {}, "the answer is not JSON"),
    "server gone mid-run": (
        {"close_after": 2},
        {"concurrency": 1},
        r"no answer after 2 tries \(last: .*(Connection refused|reset)",
    ),
}


@pytest.mark.parametrize("failure", list(SERVERS))
def test_a_server_failure_ends_the_job_in_one_named_line(failure, problems, plan, smol_tokenizer_dir, tmp_path):
    settings, entry_settings, named = SERVERS[failure]
    with FakeServer(smol_tokenizer_dir, **settings) as server:
        url = server.url + entry_settings.pop("url_path", "")
        line = failure_of(problems, plan, tmp_path, model_entry(url, smol_tokenizer_dir, **entry_settings))
    assert re.search(named, line), line


def test_no_server_at_all_is_named(problems, plan, smol_tokenizer_dir, tmp_path):
    line = failure_of(problems, plan, tmp_path, model_entry(closed_port_url(), smol_tokenizer_dir))
    assert "/v1/models: no answer after 2 tries" in line and "refused" in line.lower(), line


def test_a_silent_server_ends_the_job_without_waiting_out_the_timeout(
    problems, plan, smol_tokenizer_dir, tmp_path, monkeypatch
):
    """A SIGTERM'd llama-server keeps its connections open and answers nothing: the job asks its
    /health after PROBE_EVERY_S of silence and ends, long before a request's 60 s timeout."""
    monkeypatch.setattr(openai_transport, "PROBE_EVERY_S", 0.5)
    monkeypatch.setattr(openai_transport, "PROBE_TIMEOUT_S", 0.5)
    began = time.monotonic()
    with FakeServer(smol_tokenizer_dir, hang_after=2) as server:
        line = failure_of(problems, plan, tmp_path, model_entry(server.url, smol_tokenizer_dir, concurrency=1))
        assert server.answered == 2
    assert "the server stopped answering" in line and "GET /health: " in line, line
    assert time.monotonic() - began < 30


def test_a_slow_server_that_answers_its_health_probe_is_waited_for(problems, plan, smol_tokenizer_dir, tmp_path):
    """The probe ends only a server that does not answer: a slow one (here, every request retried
    once after an HTTP 503) is waited for, and the job finishes."""
    with FakeServer(smol_tokenizer_dir, fail_first=2) as server:
        entry = model_entry(server.url, smol_tokenizer_dir, retries=2)
        with one_line_failures("reference"):
            run_reference(
                problems, entry, effective_protocol(plan), CELL, "gsm8k", tmp_path / "cache",
                tmp_path / "c.parquet", tmp_path / "g.json",
            )  # fmt: skip
    assert (tmp_path / "c.parquet").exists()


SCRIPT = """
import json, runpy, sys
from types import SimpleNamespace as NS
from cotdyn.generation.backends import openai_transport
a = json.loads(sys.argv[1])
openai_transport.PROBE_EVERY_S = openai_transport.PROBE_TIMEOUT_S = 0.5
snakemake = NS(
    input=NS(problems=a["problems"]),
    output=NS(chains=a["out"] + "/chains.parquet", generation=a["out"] + "/generation.json"),
    params=NS(model=a["model"], model_key="served", protocol=a["protocol"], benchmark="gsm8k",
              cache=a["out"] + "/cache", benchmark_entry=None),
    wildcards=NS(cell=a["cell"]),
    log=[a["out"] + "/reference.log"],
    config={"models": {"served": {}}},
)
runpy.run_path(a["script"], init_globals={"snakemake": snakemake}, run_name="__main__")
"""


@pytest.mark.slow  # a fresh interpreter: the failures in this one are the tests above
def test_the_rule_script_prints_the_one_line_to_its_log_and_terminal(problems, plan, smol_tokenizer_dir, tmp_path):
    """workflow/scripts/reference.py, run as Snakemake runs a script (a fresh Python), against a server
    that goes silent after one answer: exit 1, the named line last on stderr and in the rule's log,
    no traceback in either, and no wait for the requests left hanging (their threads are daemons)."""
    with FakeServer(smol_tokenizer_dir, hang_after=1) as server:
        entry = model_entry(server.url, smol_tokenizer_dir, concurrency=2)
        args = {
            "problems": str(problems),
            "model": entry,
            "protocol": effective_protocol(plan),
            "cell": CELL,
            "out": str(tmp_path),
            "script": str(ROOT / "workflow/scripts/reference.py"),
        }
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, json.dumps(args)], capture_output=True, text=True, timeout=300
        )
    log = (tmp_path / "reference.log").read_text()
    assert done.returncode == 1, done.stderr
    for shown in (done.stderr, log):
        assert "Traceback" not in shown, shown
        last = shown.strip().splitlines()[-1]
        assert last.startswith(f"reference of {CELL}: http://127.0.0.1:"), shown
    # one or both of the two requests may be in flight when the silence is noticed (how far the
    # second got is up to the machine's load)
    assert re.search(r"the server stopped answering \([12] requests in flight", done.stderr.strip().splitlines()[-1])
