"""A plan file with exactly one reading (issue 60, finding 9; cotdyn.files.one_reading).

Each way a YAML 1.1 reader (PyYAML, cotdyn's), a YAML 1.2 reader and a person read one text apart is
refused by name at ``cotdyn register``; a property test generates plan-like texts and checks that
cotdyn either refuses a text or reads it exactly as ruamel.yaml, an independent YAML 1.2 parser, does.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from cotdyn.files.one_reading import yaml12_scalar
from cotdyn.files.strict import UntrustedFileError, parse_yaml
from cotdyn.plan.registration import register

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "old, new, named",
    [
        ("  top_k: 0", "  top_k: 010", "'010' reads as 8 in YAML 1.1 and 10 in YAML 1.2"),
        ("  top_k: 0", "  top_k: 1_0", "'1_0' reads as 10 in YAML 1.1 and '1_0' in YAML 1.2"),
        ("  top_p: 1.0", "  top_p: 1e0", "'1e0' reads as '1e0' in YAML 1.1 and 1.0 in YAML 1.2"),
        ("  cap: 8", "  cap: 1:30", "'1:30' reads as 90 in YAML 1.1 and '1:30' in YAML 1.2"),
        ("  null_answers: drop", "  null_answers: off", "'off' reads as False in YAML 1.1 and 'off' in YAML 1.2"),
        ("  cap: 8", "  base: &b {cap: 8}\n  <<: *b", "a merge key (<<)"),
        ("  cap: 8", "  cap: !!int '8'", "an explicit tag"),
        ("  cap: 8", "  cap: 8\n  c\u0430p: 9", "is not printable ASCII"),
        ("  cap: 8", "  cap: 8 # as registered\u2028  extraction: final_statement", "a LINE SEPARATOR character (U+2028)"),
        ("  cap: 8", "  cap: 8 # \x85", "a NEL character (U+0085)"),
        ("  cap: 8", "  cap: 8 # \u202e", "an invisible or reordering character (U+202E)"),
    ],
    ids=["octal", "underscore", "exponent", "sexagesimal", "boolean", "merge", "tag", "lookalike", "u2028", "nel", "bidi"],
)  # fmt: skip
def test_a_plan_with_two_readings_is_refused_at_register(tmp_path, old, new, named):
    text = (ROOT / "preregistration" / "plan.yaml").read_text()
    assert old in text
    plan = tmp_path / "plan.yaml"
    plan.write_text(text.replace(old, new, 1))
    with pytest.raises((UntrustedFileError, ValueError), match="line [0-9]+: ") as e:
        register(plan, tmp_path / "REGISTERED", "2026-12-06")
    assert named in str(e.value) and str(plan) in str(e.value)
    assert not (tmp_path / "REGISTERED").exists()


def test_every_shipped_plan_and_registration_has_one_reading():
    for path in [*ROOT.glob("preregistration/**/plan.yaml"), *ROOT.glob("preregistration/**/REGISTERED")]:
        parse_yaml(path.read_text(), path)  # refuses, naming the file, if it had two readings


@pytest.mark.parametrize(
    "text, value",
    [("010", 10), ("0o10", 8), ("0x1F", 31), ("1e3", 1000.0), ("-.5", -0.5), ("yes", "yes"), ("Null", None),
     ("TRUE", True), ("~", None), ("", None), ("+12", 12)],
)  # fmt: skip
def test_the_yaml_12_core_schema_agrees_with_ruamel(text, value):
    """(ruamel.yaml also reads 1_000 and dates as YAML 1.1 did, outside the core schema: cotdyn
    refuses both, as YAML 1.1 and the core schema read them apart.)"""
    assert yaml12_scalar(text) == value
    assert YAML(typ="safe", pure=True).load(f"k: {text}\n")["k"] == value


# --- the property: refused, or read as a YAML 1.2 parser reads it ----------------------------

# Half of each drawn from what every reader reads alike, half from what readers read apart.
SCALARS = st.one_of(
    st.sampled_from(["0", "1.5", "-3", "0.05", "1.0e+3", "true", "False", "null", "~", "drop", "a b", "TRUE", ".inf"]),
    st.sampled_from(["010", "0o17", "0x1f", "0b11", "1_000", "1e3", ".5", "1.", "+1", "-0", "-.Inf", ".nan", "yes",
                     "no", "on", "off", "y", "n", "1:30", "2026-12-06", "12:00:00", "seed", "<<", "=", "1e-3", "0xG",
                     "09", "1__0", "Null", "NaN", "inf"]),
)  # fmt: skip
KEYS = st.one_of(
    st.sampled_from(["alpha", "seed", "cap", "key"]), st.sampled_from(["<<", "on", "y", "1", "010", "c\u0430p"])
)
COMMENTS = st.one_of(st.just(""), st.just(" # fine"), st.sampled_from([" # \u2028hidden: 1", " # \x85", " # \u202e"]))


@st.composite
def plan_texts(draw) -> str:
    """A block mapping of a few keys, each a scalar, a flow sequence or a nested mapping, quoted or plain."""
    lines = []
    for key in draw(st.lists(KEYS, min_size=1, max_size=3, unique=True)):
        kind = draw(st.sampled_from(["plain", "quoted", "list", "nested", "alias"]))
        value = draw(SCALARS)
        if kind == "plain":
            lines.append(f"{key}: {value}{draw(COMMENTS)}")
        elif kind == "quoted":
            lines.append(f"{key}: '{value}'")
        elif kind == "list":
            lines.append(f"{key}: [{value}, {draw(SCALARS)}]")
        elif kind == "nested":
            lines.append(f"{key}:\n  inner: {value}\n  {draw(KEYS)}: {draw(SCALARS)}")
        else:
            lines.append(f"{key}: &a{len(lines)} {{x: {value}}}\nz{len(lines)}:\n  <<: *a{len(lines)}")
    return "\n".join(lines) + "\n"


def _same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_texts())
def test_cotdyn_refuses_a_text_or_reads_it_as_a_yaml_12_parser_does(text):
    try:
        ours = parse_yaml(text, "plan.yaml")
    except UntrustedFileError:
        return
    theirs = YAML(typ="safe", pure=True).load(text)
    assert _same(ours, theirs), (text, ours, theirs)
