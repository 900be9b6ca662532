"""The four answer types (docs/reference.md section 4): number, boxed, choice and string, each on the
edge cases of its own; and ``cotdyn extract`` on every phrasing of a chosen letter."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import cotdyn

from cotdyn.grading.answers import ANSWER_TYPES, answer_type, equivalent, extract, gold_answer, normalize
from cotdyn.grading.choices import extract_letter, letter_of, show
from cotdyn.grading.registry import REGISTRY

OPTIONS = ["Planetary density will decrease.", "Planetary years will become longer.",
           "Planetary days will become shorter.", "Planetary gravity will become stronger."]  # fmt: skip

# (a model's text, the letter it chose): at least twenty ways to say a letter, and the option's text
CHOSEN = [
    ("(C)", "C"),
    ("C", "C"),
    ("C.", "C"),
    ("C)", "C"),
    ("The answer is C.", "C"),
    ("The answer is (C).", "C"),
    ("the answer is c)", "C"),
    ("the answer is a day that gets shorter", None),  # a bare lower-case "a" is an article
    ("So the answer is (c).", "C"),
    ("Answer: C", "C"),
    ("Final answer: (C) Planetary days will become shorter.", "C"),
    ("**Answer:** **C**", "C"),
    ("The correct answer is option C.", "C"),
    ("The correct option is (C)", "C"),
    ("I choose C.", "C"),
    ("I will go with C", "C"),
    ("C is correct, since a faster spin shortens the day.", "C"),
    ("(C) is the right answer.", "C"),
    ("The final answer is $\\boxed{C}$", "C"),
    ("\\boxed{\\text{(C)}}", "C"),
    ("Step 1: faster rotation.\nStep 2: shorter days.\nC", "C"),
    ("Looking at the options, [C] fits.", "C"),
    ("The answer is **C**.", "C"),
    ("The answer is: Planetary days will become shorter.", "C"),
    ("planetary days will become shorter", "C"),
    ("The answer is A. Wait, that is not right: the answer is C.", "C"),
    ("Option A is wrong and option B is wrong. The answer is C.", "C"),
    ("A faster spin means the answer is C", "C"),  # "A" opening a sentence is an article
    ("Answer：Ｃ", "C"),  # full-width forms (NFKC)
    ("The answer is E.", None),  # no option E among four
    ("A planet spins faster.", None),
    ("I am not sure.", None),
    ("", None),
]


@pytest.mark.parametrize("text, letter", CHOSEN)
def test_a_chosen_letter_is_read_in_every_phrasing(text, letter):
    assert extract_letter(text, OPTIONS) == letter
    found = extract(text, "arc", OPTIONS)
    assert (found.answer, found.status) == (letter, "ok" if letter else "no_answer")


@pytest.mark.slow  # starts the cotdyn command (tests/test_cli.py's tier); the phrasings in process are above
def test_cotdyn_extract_reads_every_phrasing_of_a_letter_on_arc():
    lines = "".join(json.dumps({"text": text, "options": OPTIONS}) + "\n" for text, _ in CHOSEN)
    result = cotdyn("extract", "--benchmark", "arc", stdin=lines)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["answer"] for line in result.stdout.splitlines()] == [letter for _, letter in CHOSEN]
    assert sum(letter is not None for _, letter in CHOSEN) >= 20


def test_without_options_a_letter_is_still_read_but_an_option_text_is_not():
    assert extract_letter("The answer is (C).") == "C"
    assert extract_letter("The answer is J") == "J"  # ten options at most without the list
    assert extract_letter("The answer is K") is None
    assert extract_letter("planetary days will become shorter") is None


@pytest.mark.parametrize(
    "answer, letter",
    [("B", "B"), ("(b)", "B"), ("**B.**", "B"), ("\\text{B}", "B"), ("B) Planetary years will become longer.", "B"),
     ("b", "B"), ("Planetary years will become longer", "B"), ("B) Planetary days", None), ("Z", None), ("", None)],
)  # fmt: skip
def test_letter_of_an_isolated_answer(answer, letter):
    assert letter_of(answer, OPTIONS) == letter


def test_an_option_text_shared_by_two_options_names_neither():
    assert letter_of("yes", ["yes", "no", "yes"]) is None


def test_the_prompt_shows_the_options_lettered_in_order():
    shown = show("Which is largest?", ["one", "two", "three"])
    assert shown == "Which is largest?\n\n(A) one\n(B) two\n(C) three\n\nAnswer with the letter of the correct option."


@pytest.mark.parametrize(
    "a, b, same",
    [("B", "(B)", True), ("B", "b", True), ("B", "C", False), ("B", "Planetary years will become longer.", True),
     ("nonsense", "more nonsense", False), ("B", None, False)],
)  # fmt: skip
def test_choice_equivalence(a, b, same):
    assert equivalent(a, b, "choice", options=OPTIONS) is same


@pytest.mark.parametrize(
    "text, answer",
    [
        ("The answer is Paris.", "paris"),
        ("Answer: **Paris**", "paris"),
        ("I think it is London.\nAnswer: PARIS", "paris"),
        ('The answer is "New  York".', "new york"),
        ("The answer is 3.5 meters.", "3.5 meters"),
        ("so \\boxed{\\text{Paris}}", "paris"),
        ("Paris", "paris"),
        ("First line\n\nlast line!", "last line"),
        ("Ｐａｒｉｓ", "paris"),
        ("", None),
        ("Answer: ...", None),
    ],
)
def test_string_extraction_is_the_stated_answer_normalized(text, answer):
    found = extract(text, "string")
    assert (found.answer, found.status) == (answer, "ok" if answer else "no_answer")


@pytest.mark.parametrize(
    "a, b, same",
    [("Paris", "paris.", True), ("New York", "new   york", True), ("Paris", "Lyon", False), ("!", "?", False)],
)
def test_string_equivalence_is_normalized_exact_match(a, b, same):
    assert equivalent(a, b, "string") is same


@pytest.mark.parametrize(
    "rule, text, answer",
    [
        ("number", "So $1,200.00 in all.", "1200"),
        ("number", "\\boxed{7} apples", "7"),
        ("number", "nothing", None),
        ("boxed", "thus \\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}"),
        ("boxed", "\\boxed{x = 5}", "5"),
        ("boxed", "unboxed 12", "12"),
        ("svamp", "145.0 bananas in each group", "145"),
        ("math_algebra", "\\boxed{2}", "2"),
    ],
)
def test_number_and_boxed_types_keep_the_gsm8k_and_math_rules(rule, text, answer):
    assert extract(text, rule).answer == answer
    twin = {"number": "gsm8k", "boxed": "math500"}.get(rule)
    if twin:  # the type and the benchmark that defined it extract alike
        assert extract(text, twin) == extract(text, rule)


@pytest.mark.parametrize(
    "raw, rule, gold",
    [
        ("so 18\n#### 18", "gsm8k", "18"),
        ("145.0", "svamp", "145"),
        ("The graph has $\\boxed{2}$ vertical asymptotes.", "math_algebra", "2"),
        ("\\frac{1}{2}", "math500", "\\frac{1}{2}"),
        ("C", "arc", "C"),
        ("Paris.", "string", "paris"),
        ("eighteen", "number", None),
    ],
)
def test_gold_answers_by_rule(raw, rule, gold):
    assert gold_answer(raw, rule, OPTIONS) == gold


def test_every_registered_benchmark_has_an_answer_type():
    assert {answer_type(name) for name in REGISTRY} <= set(ANSWER_TYPES)
    assert [answer_type(t) for t in ANSWER_TYPES] == list(ANSWER_TYPES)
    assert normalize("(B)", "arc") == "B" and normalize(" B ", "choice") == "B"


@pytest.mark.slow  # starts the cotdyn command (tests/test_cli.py's tier)
@pytest.mark.parametrize(
    "rule, pairs, expected",
    [
        ("arc", [{"a": "(B)", "b": "B", "options": OPTIONS}, {"a": "Planetary years will become longer", "b": "B",
                 "options": OPTIONS}, {"a": "A", "b": "B"}], [True, True, False]),
        ("string", [{"a": "Paris.", "b": "paris"}, {"a": "Paris", "b": "Rome"}], [True, False]),
        ("svamp", [{"a": "145.0", "b": "145"}], [True]),
    ],
)  # fmt: skip
def test_cotdyn_equivalent_takes_every_benchmark_and_type(rule, pairs, expected):
    result = cotdyn("equivalent", "--benchmark", rule, stdin="".join(json.dumps(p) + "\n" for p in pairs))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["equivalent"] for line in result.stdout.splitlines()] == expected


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ABCabc()[]{}*_.:\n \\boxedtanswerisoption12é✓")), max_size=80))
def test_any_text_gives_a_valid_letter_or_none(text):
    found = extract(text, "choice", OPTIONS)
    assert found.answer is None or found.answer in "ABCD"
    assert found.status == ("ok" if found.answer else "no_answer")
    assert extract(text, "string").answer is None or extract(text, "string").answer.strip()
