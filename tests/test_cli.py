"""The command line of docs/reference.md section 11, as people with their own traces call it."""

import json
import subprocess
import sys

import pytest

# Each test starts the cotdyn command (a second of imports): the slow tier.
pytestmark = pytest.mark.slow


def cotdyn(*args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "cotdyn.cli.main", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_extract_writes_one_line_per_input():
    lines = "\n".join(json.dumps({"text": t}) for t in ["so $1,200.00 in all.", "no idea"]) + "\n"
    result = cotdyn("extract", "--benchmark", "gsm8k", stdin=lines)
    assert result.returncode == 0, result.stderr
    assert [json.loads(x) for x in result.stdout.splitlines()] == [
        {"answer": "1200", "status": "ok"},
        {"answer": None, "status": "no_answer"},
    ]


@pytest.mark.parametrize(
    "method, expected", [("normalized", [True, False, False]), ("math_verify", [True, False, True])]
)
def test_equivalent_under_the_registered_rule_and_the_sensitivity_variant(method, expected):
    pairs = [{"a": "\\frac{1}{2}", "b": "0.5"}, {"a": "3", "b": "4"}, {"a": "\\frac{2}{4}", "b": "\\frac{1}{2}"}]
    stdin = "\n".join(json.dumps(p) for p in pairs)
    result = cotdyn("equivalent", "--benchmark", "math500", "--method", method, stdin=stdin)
    assert [json.loads(x)["equivalent"] for x in result.stdout.splitlines()] == expected


def test_a_line_without_its_field_is_named():
    result = cotdyn("extract", "--benchmark", "gsm8k", stdin='{"txt": "5"}\n')
    assert result.returncode != 0 and "stdin line 1: missing field 'text'" in result.stderr


def test_a_closed_pipe_ends_the_command_quietly():
    """`cotdyn ... | head -1`: the reader goes away after one line; no BrokenPipeError traceback."""
    lines = "".join(json.dumps({"text": f"so {i} in all."}) + "\n" for i in range(20000))
    result = subprocess.run(
        f"{sys.executable} -m cotdyn.cli.main extract --benchmark gsm8k | head -1",
        shell=True,
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout == '{"answer": "0", "status": "ok"}\n'
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
