"""Plan v4's canonical answer form (issue 49; docs/reference.md section 4; cotdyn.grading.canonical).

Under ``answer_form: canonical`` a number or boxed answer that is one number is its value in one
form, so equal decimals, fractions, trailing zeros, money and percent are one class; plans v1-v3
(``as_written``, which they do not name) keep grading every answer as before, quirk included.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grading import TOKENS, _frames

from cotdyn.grading import answers
from cotdyn.grading.answers import answer_class, equivalent, extract, gold_answer, normalize
from cotdyn.grading.canonical import rational, written
from cotdyn.methods.dynamics import traces
from cotdyn.methods.math_shepherd import math_shepherd_from_samples
from cotdyn.plan.config import RECORDS_ONLY, protocol_for
from cotdyn.plan.load import effective_protocol, load_plan
from cotdyn.records import table as R
from cotdyn.report import grading as G

ROOT = Path(__file__).resolve().parents[1]
OLDER_PLANS = {v: ROOT / "preregistration" / v / "plan.yaml" for v in ("v1", "v2", "v3")}
CANONICAL = "canonical"
HALF = "\\frac{1}{2}"


# --- the acceptance cases of the issue --------------------------------------------------------


@pytest.mark.parametrize("boxed", ["\\boxed{0.50}", "\\boxed{0.5}", "\\boxed{\\frac12}"])
def test_every_spelling_of_a_half_is_gold_one_half_under_v4(boxed):
    found = extract(f"So the answer is {boxed}.", "math500", answer_form=CANONICAL)
    assert found.answer == HALF
    assert equivalent(found.answer, HALF, "math500", answer_form=CANONICAL)
    assert equivalent(boxed, HALF, "math500", answer_form=CANONICAL)


def test_money_with_trailing_zeros_is_its_amount_under_v4():
    assert equivalent("$8.50", "8.5", "gsm8k", answer_form=CANONICAL)
    assert extract("It costs $8.50.", "gsm8k", answer_form=CANONICAL).answer == normalize(
        "8.5", "gsm8k", answer_form=CANONICAL
    )
    assert equivalent("\\boxed{\\$8.50}", "8.5", "math500", answer_form=CANONICAL)
    assert not equivalent("$8.50", "8.6", "gsm8k", answer_form=CANONICAL)


@pytest.mark.parametrize(
    "a, b, bench",
    [
        ("18.00", "18", "gsm8k"),
        ("2.50", "2.5", "gsm8k"),
        ("1,000.0", "1000", "gsm8k"),
        ("\\boxed{2.50}", "\\frac{5}{2}", "math500"),
        ("\\boxed{0.250}", "1/4", "math500"),
        ("\\boxed{-0.50}", "-\\frac{1}{2}", "math500"),
        ("\\boxed{\\dfrac{6}{4}}", "1.5", "math500"),
        ("\\boxed{10{,}000.00}", "10,\\!000", "math500"),
    ],
)
def test_trailing_zeros_fractions_and_separators_are_one_value(a, b, bench):
    assert equivalent(a, b, bench, answer_form=CANONICAL)


def test_a_percent_is_the_number_written():
    # GSM8K's golds give a percent question's answer as the number before the sign
    assert equivalent("50%", "50", "gsm8k", answer_form=CANONICAL)
    assert gold_answer("... so 50% of them.\n#### 50", "gsm8k", answer_form=CANONICAL) == "50"
    assert equivalent("\\boxed{50\\%}", "50", "math500", answer_form=CANONICAL)
    assert equivalent("\\boxed{12.50\\%}", "\\frac{25}{2}", "math500", answer_form=CANONICAL)
    # not its share: 50% is not 0.5
    assert not equivalent("\\boxed{50\\%}", "0.5", "math500", answer_form=CANONICAL)


def test_other_answers_keep_their_classes():
    assert normalize("\\boxed{x + 1}", "math500", answer_form=CANONICAL) == normalize("\\boxed{x + 1}", "math500")
    assert normalize("\\boxed{(0.5, 1)}", "math500", answer_form=CANONICAL) == "(0.5,1)"  # a tuple
    assert normalize("\\boxed{3\\frac{1}{2}}", "math500", answer_form=CANONICAL) == "3\\frac{1}{2}"  # mixed
    assert normalize("\\boxed{\\frac{1}{0}}", "math500", answer_form=CANONICAL) == "\\frac{1}{0}"
    assert extract("I think it is B.", "arc", answer_form=CANONICAL).answer == "B"
    assert normalize("Evelyn.", "string", answer_form=CANONICAL) == "evelyn"
    with pytest.raises(ValueError, match="unknown answer_form 'exact'"):
        normalize("1", "gsm8k", answer_form="exact")


# --- the rule itself, pinned: a change to v4's rule fails here and is a new plan version -----

V4_CLASSES = {
    ("0.50", "math500"): "\\frac{1}{2}",
    ("0.5", "math500"): "\\frac{1}{2}",
    ("\\frac12", "math500"): "\\frac{1}{2}",
    ("\\frac{-2}{4}", "math500"): "-\\frac{1}{2}",
    ("-.5", "math500"): "-\\frac{1}{2}",
    ("+3", "math500"): "3",
    ("7.0", "math500"): "7",
    ("1,234,567", "math500"): "1234567",
    ("\\$8.50", "math500"): "\\frac{17}{2}",
    ("33\\frac{1}{3}\\%", "math500"): "33\\frac{1}{3}",  # a mixed number stays itself
    ("50\\%", "math500"): "50",
    ("0.125", "math500"): "\\frac{1}{8}",
    ("\\sqrt{2}", "math500"): "\\sqrt{2}",
    ("$8.50", "gsm8k"): "\\frac{17}{2}",
    ("-$5.00", "gsm8k"): "-5",
    ("50%", "gsm8k"): "50",
    ("1/2", "gsm8k"): "\\frac{1}{2}",  # a whole answer that is one fraction (as_written: its last number, 2)
    ("\\frac{17}{2}", "gsm8k"): "\\frac{17}{2}",  # a canonical class read again
    ("So she pays $1,200.00 in all.", "gsm8k"): "1200",
}


@pytest.mark.parametrize("answer, bench", list(V4_CLASSES))
def test_the_v4_rule_is_pinned(answer, bench):
    assert normalize(answer, bench, answer_form=CANONICAL) == V4_CLASSES[(answer, bench)]


def test_the_plans_register_their_rule():
    assert effective_protocol(load_plan(ROOT / "preregistration" / "plan.yaml"))["answer_form"] == CANONICAL
    for path in OLDER_PLANS.values():
        plan = load_plan(path)
        assert "answer_form" not in plan["protocol"]
        assert effective_protocol(plan)["answer_form"] == "as_written"
    assert "answer_form" in RECORDS_ONLY


def test_an_unknown_answer_form_is_a_config_error(plan):
    config = {"variants": {"x": {"answer_form": "rounded"}}}
    with pytest.raises(ValueError, match="unknown answer_form 'rounded' \\(known: as_written, canonical\\)"):
        protocol_for(config, plan, "x")


# --- v1-v3 grade as before ---------------------------------------------------------------------


def test_as_written_keeps_the_quirk_that_v1_to_v3_registered():
    # written down in docs/reference.md section 4: 0.50 is 0.5, 0.5 is \frac{1}{2}, so the two differ
    assert normalize("0.50", "math500") == "0.5" and normalize("0.5", "math500") == HALF
    assert not equivalent("\\boxed{0.50}", HALF, "math500")
    assert not equivalent("$8.50", "8.5", "gsm8k")
    assert normalize("1/2", "gsm8k") == "2"


@pytest.mark.parametrize("version", list(OLDER_PLANS))
def test_records_of_older_plans_grade_as_before(version):
    """v1-v3 records equal the records of a protocol without answer_form (the code before it)."""
    plan = load_plan(OLDER_PLANS[version])
    spellings = ["\\boxed{0.50}", "\\boxed{0.5}", "\\boxed{\\frac12}", "so \\boxed{0.50}", "\\boxed{\\$0.50}"]
    chains, samples, _ = _frames(["so \\boxed{0.50}"], [spellings], "math500", [HALF])
    protocol = effective_protocol(plan)
    before = {k: v for k, v in protocol.items() if k != "answer_form"}
    records = R.records_table(chains, samples, protocol, plan["exclusion"], "math500", "c")
    pd.testing.assert_frame_equal(records, R.records_table(chains, samples, before, plan["exclusion"], "math500", "c"))
    # the quirk in the records: 0.50's class 0.5 and 0.5's \frac{1}{2} are two classes of the entropy,
    # while correctness, which normalizes a stored class once more, grades both right
    assert records["pred"].tolist() == ["0.5"] and records["final_entropy"][0] > 0 and records["correct"].all()


# what the as_written rule gave every MATH-500 gold (bare and boxed), the tail of every MATH-500 solution
# and GSM8K answer, and issue 49's spellings, computed by the code before answer_form existed (e6d8ed5)
AS_WRITTEN_SHA256 = "f5d9ed4467b8e3659eb0e4db5343321d08ceb676c4ca4f1ec3d48b2c32099795"


def test_as_written_grades_every_panel_text_as_the_code_before_v4():
    math = [json.loads(line) for line in (ROOT / "data/math500_test.jsonl").read_text().splitlines()]
    gsm = [json.loads(line) for line in (ROOT / "data/gsm8k_test.jsonl").read_text().splitlines()]
    texts = [x for r in math for x in (r["answer"], f"so \\boxed{{{r['answer']}}}.", r["solution"][-200:])]
    texts += [r["answer"][-120:] for r in gsm] + [
        "$8.50",
        "0.50",
        "\\boxed{0.50}",
        "50%",
        "50\\%",
        "1/2",
        "\\frac12",
        "-0.5",
    ]
    graded = []
    for text in texts:
        for bench in ("math500", "gsm8k"):
            found, gold = extract(text, bench), gold_answer(text, bench)
            graded.append([found.answer, found.status, normalize(text, bench), gold,
                           equivalent(found.answer, gold, bench), equivalent(text, HALF, bench)])  # fmt: skip
    assert len(texts) == 2827
    assert hashlib.sha256(json.dumps(graded).encode()).hexdigest() == AS_WRITTEN_SHA256


# --- entropy classes and correctness agree under v4 --------------------------------------------


def test_v4_records_read_every_spelling_as_one_class(plan):
    spellings = ["\\boxed{0.50}", "\\boxed{0.5}", "\\boxed{\\frac12}", "\\boxed{1/2}", "\\boxed{\\$0.50}"]
    chains, samples, problems = _frames(["so \\boxed{0.50}"], [spellings], "math500", ["\\frac{1}{2}"])
    protocol = effective_protocol(plan)
    assert protocol["answer_form"] == CANONICAL
    records = R.records_table(chains, samples, protocol, plan["exclusion"], "math500", "c")
    assert records["pred"].tolist() == [HALF] and records["gold"].tolist() == [HALF]
    assert records["final_entropy"].tolist() == [0.0] and records["final_confidence"].tolist() == [1.0]
    assert records["correct"].all() and records["chain_correct"].all()
    assert records["chain_answer"].tolist() == [HALF]
    # dynamics and Math-Shepherd read the same classes: every state is the gold, every sample hits it
    samples = samples.assign(cell="m-math500")
    trace = traces(
        samples, records.assign(cell="m-math500"), benchmarks={"m-math500": "math500"}, answer_form=CANONICAL
    )
    assert all(state == {HALF: 1.0} for state in trace[0].states) and trace[0].gold_classes == {HALF}
    shepherd = math_shepherd_from_samples(samples, records, "math500", answer_form=CANONICAL)
    assert shepherd["soft"].tolist() == [1.0, 1.0]
    graded = G.verdicts(G.graded_texts(chains, samples, problems, "math500", CANONICAL), "math500", None, CANONICAL)
    assert graded["registered"].all()


def test_v4_records_read_money_and_trailing_zeros_as_gsm8k_gold(plan):
    texts = ["It costs $8.50.", "So 8.5 dollars.", "The total is 8.50", "$8.5"]
    chains, samples, _ = _frames(["It costs $8.50."], [texts], "gsm8k", ["so 17/2\n#### 8.5"])
    records = R.records_table(chains, samples, effective_protocol(plan), plan["exclusion"], "gsm8k", "c")
    assert records["pred"].tolist() == ["\\frac{17}{2}"] and records["final_entropy"].tolist() == [0.0]
    assert records["correct"].all() and records["chain_correct"].all()
    as_written = effective_protocol(plan) | {"answer_form": "as_written"}
    before = R.records_table(chains, samples, as_written, plan["exclusion"], "gsm8k", "c")
    assert before["final_entropy"][0] > 0  # 8.50 and 8.5 were two classes


# --- properties: every spelling of one value is one class, and the class is a fixed point -----

values = st.builds(Fraction, st.integers(-(10**7), 10**7), st.integers(1, 400))


def _terminating(value: Fraction) -> bool:
    q = value.denominator
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q == 1


def _decimal(value: Fraction, zeros: int) -> str:
    """The decimal of a terminating value, ``zeros`` trailing zeros added."""
    sign, value = ("-" if value < 0 else ""), abs(value)
    places = 0
    while (value * 10**places).denominator != 1:
        places += 1
    digits = str(int(value * 10**places)).rjust(places + 1, "0")
    whole, frac = digits[: len(digits) - places], digits[len(digits) - places :]
    frac += "0" * zeros
    return sign + (f"{whole}.{frac}" if frac else whole)


def _grouped(text: str) -> str:
    """A decimal with its thousands separated by commas."""
    sign, rest = ("-", text[1:]) if text.startswith("-") else ("", text)
    whole, dot, frac = rest.partition(".")
    return sign + f"{int(whole):,}" + dot + frac


@st.composite
def spellings(draw):
    """A value and several spellings of it: decimals with trailing zeros, separators, money and
    percent (a terminating value's), a/b, \\frac, \\dfrac and \\frac{-a}{b} with a common factor."""
    value = draw(values)
    k = draw(st.integers(1, 5))
    p, q = value.numerator, value.denominator
    sign, n = ("-" if p < 0 else ""), abs(p)
    forms = [
        f"{sign}{n * k}/{q * k}",
        f"{sign}\\frac{{{n * k}}}{{{q * k}}}",
        f"\\frac{{{sign}{n * k}}}{{{q * k}}}",
        f"{sign}\\dfrac{{{n}}}{{{q}}}",
    ]
    if n < 10 and q < 10:
        forms.append(f"{sign}\\frac{n}{q}")
    if _terminating(value):
        zeros = draw(st.integers(0, 3))
        decimal = _decimal(value, zeros)
        forms += [decimal, _grouped(decimal), f"{decimal}\\%", f"\\${_grouped(decimal)}".replace("\\$-", "-\\$")]
    return value, forms


@settings(max_examples=300, deadline=None, derandomize=True)
@given(spellings())
def test_every_spelling_of_a_value_is_one_class(case):
    value, forms = case
    expected = written(value)
    for form in forms:
        assert rational(form) == value, form
        assert normalize(f"\\boxed{{{form}}}", "math500", answer_form=CANONICAL) == expected, form
        assert extract(f"so \\boxed{{{form}}}.", "math500", answer_form=CANONICAL).answer == expected, form
        assert normalize(expected, "math500", answer_form=CANONICAL) == expected


@settings(max_examples=300, deadline=None, derandomize=True)
@given(values.filter(_terminating), st.integers(0, 3), st.booleans())
def test_every_gsm8k_spelling_of_a_value_is_one_class(value, zeros, money):
    decimal = _grouped(_decimal(value, zeros))
    text = ("-$" + decimal[1:] if decimal.startswith("-") else "$" + decimal) if money else decimal + "%"
    found = extract(f"In all: {text}.", "gsm8k", answer_form=CANONICAL).answer
    assert found == written(value) == gold_answer(f"#### {_decimal(value, 0)}", "gsm8k", answer_form=CANONICAL)
    assert normalize(found, "gsm8k", answer_form=CANONICAL) == found


@pytest.mark.slow  # 2,000 examples: the suite, not the inner loop
@settings(max_examples=2000, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(TOKENS), max_size=20).map("".join))
def test_canonical_normalization_is_idempotent(answer):
    for bench in ("math500", "gsm8k"):
        once = normalize(answer, bench, answer_form=CANONICAL)
        assert once is None or normalize(once, bench, answer_form=CANONICAL) == once, (bench, once)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([*TOKENS, " so ", "\\boxed{", "}", "$", "answer is ", "\n"]), max_size=24).map("".join))
def test_a_stored_class_maps_to_what_re_extraction_finds(text):
    """The records map stored as_written classes (answer_class); a v4 re-extraction finds the same."""
    for bench in ("math500", "gsm8k"):
        stored = extract(text, bench)
        assert extract(text, bench, answer_form=CANONICAL).answer == answer_class(stored.answer, bench, CANONICAL)


# --- the command line -------------------------------------------------------------------------


def test_cotdyn_extract_and_equivalent_take_the_answer_form(monkeypatch, capsys):
    """The commands' entry point in this process (a fresh interpreter per command costs a second)."""
    from cotdyn.cli.main import main

    def cotdyn(*args, stdin) -> str:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        assert main(list(args)) == 0
        return capsys.readouterr().out

    pair = json.dumps({"a": "\\boxed{0.50}", "b": HALF})
    canonical = cotdyn("equivalent", "--benchmark", "math500", "--answer-form", "canonical", stdin=pair)
    written_ = cotdyn("equivalent", "--benchmark", "math500", stdin=pair)
    assert json.loads(canonical) == {"equivalent": True} and json.loads(written_) == {"equivalent": False}
    out = cotdyn("extract", "--benchmark", "gsm8k", "--answer-form", "canonical", stdin=json.dumps({"text": "$8.50"}))
    assert json.loads(out) == {"answer": "\\frac{17}{2}", "status": answers.OK}


def test_generations_agree_on_a_prediction_by_its_canonical_class():
    from cotdyn.analysis import secondary_generations as gen

    def records(preds):
        n = len(preds)
        return pd.DataFrame({"problem_id": [f"p{i}" for i in range(n)], "pred": preds, "correct": [True] * n,
                             "monotone": [True] * n, "trajectory": [[0.5, 0.0]] * n, "excluded": [False] * n})  # fmt: skip

    a, b = records(["\\frac{17}{2}", "3"]), records(["\\frac{3}{2}", "3"])

    def prediction(form):
        rows = gen.generation_agreement(a, b, None, 0.95, None, "gsm8k", "normalized", form)
        return next(r["agreement"] for r in rows if r["agreement_on"] == "prediction")

    # as_written reads a number-type class by its last number: both 2; v4 reads each as its value
    assert prediction("as_written") == 1.0 and prediction(CANONICAL) == 0.5
