"""The simulated model misbehaves like a real one: each planted misbehaviour shows in
the text at rate 1, never at rate 0, at about its rate in between, and rewrites only the text,
not the planted answers."""

import math
import re
from pathlib import Path

import pytest
import yaml

from cotdyn.dataset.benchmarks import load_benchmark
from cotdyn.generation.backends import Request, Sampling
from cotdyn.generation.backends.simulated import MISBEHAVIOUR, Planted, SimulatedBackend, revision
from cotdyn.grading import answers

ROOT = Path(__file__).resolve().parents[1]
GOLDS = {
    "gsm8k": ["18", "1250", "-3", "2.5", "7"],
    "math500": ["\\frac{3}{4}", "12", "-2.5", "\\frac{\\sqrt{3}}{2}", "(3,4)"],
}
BUDGET = 4096  # roomy: with misbehaviour off no chain reaches it, so no chain is cut by chance


def backend(bench, n_questions=40, **rates):
    golds = {f"Question {i}: how much?": GOLDS[bench][i % len(GOLDS[bench])] for i in range(n_questions)}
    return SimulatedBackend(golds, bench, Planted(**rates))


def references(b, seeds=(0, 1), budget=BUDGET):
    """One reference chain per (question, seed)."""
    requests = [
        Request(tuple(b.tokenizer.chat_prompt_ids("Solve.", q)), 1, Sampling(0.7, budget), s, "reference")
        for q in b.golds
        for s in seeds
    ]
    return [c for (c,) in b.generate(requests)]


def continuation_requests(b, n=5):
    """n continuations of each chain's first one or two units (a unit is one line): prefixes that
    carry a plan and no closing line, so none is a finished chain, which continues with nothing."""
    requests = []
    for seed, q in enumerate(b.golds):
        prompt = tuple(b.tokenizer.chat_prompt_ids("Solve.", q))
        ((chain,),) = b.generate([Request(prompt, 1, Sampling(0.7, BUDGET), seed, "reference")])
        lines = [line for line in chain.text.split("\n")[:3] if not line.startswith(("The final", "I am not"))]
        cut = len("\n".join(lines).encode())
        requests.append(Request(prompt + chain.token_ids[:cut], n, Sampling(0.7, 150), 1000 * seed))
    return requests


def continuations(b, n=5):
    return [c for samples in b.generate(continuation_requests(b, n)) for c in samples]


def _numbers(text):
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def _states_an_answer(c):
    return "final answer is" in c.text  # not a planted null ("I need to reconsider ...")


def _has_latex_form(c):
    return "(3,4)" not in c.text  # LaTeX forms exist for numbers and fractions only


# name -> (the planted rate, the texts it acts on, what a misbehaving text looks like, the texts it can act on)
MISBEHAVIOURS = {
    "unanswered": (
        "unanswered_rate",
        references,
        lambda c, bench: answers.extract(c.text, bench).status == answers.NO_ANSWER,
        None,
    ),
    "cut mid-number": (
        "cut_rate",
        references,
        lambda c, bench: c.finish_reason == "length" and c.text[-2:].isdigit(),
        None,
    ),
    "empty": ("empty_rate", continuations, lambda c, bench: c.text == "" and c.token_ids == (), None),
    "conflicting": (
        "conflicting_rate",
        continuations,
        lambda c, bench: "not right" in c.text and len(_numbers(c.text)) >= 2,
        _states_an_answer,
    ),
    "several boxed": ("boxed_rate", continuations, lambda c, bench: c.text.count("\\boxed{") >= 2, _states_an_answer),
    "latex": (
        "latex_rate",
        continuations,
        lambda c, bench: any(form in c.text for form in ("\\dfrac", "\\text{ cm}", "\\$")),
        lambda c: _states_an_answer(c) and _has_latex_form(c),
    ),
    "non-ascii": ("non_ascii_rate", continuations, lambda c, bench: any(ord(ch) > 127 for ch in c.text), None),
}
CASES = [(name, bench) for name in MISBEHAVIOURS for bench in GOLDS]


@pytest.mark.parametrize("name,bench", CASES)
def test_a_misbehaviour_shows_at_rate_one_and_never_at_rate_zero(name, bench):
    rate, texts, shows, applies = MISBEHAVIOURS[name]
    on = [c for c in texts(backend(bench, **{rate: 1.0})) if applies is None or applies(c)]
    off = texts(backend(bench))
    assert len(on) >= 20 and all(shows(c, bench) for c in on)
    assert not any(shows(c, bench) for c in off)


@pytest.mark.parametrize("rate", ["conflicting_rate", "boxed_rate", "latex_rate", "non_ascii_rate"])
@pytest.mark.parametrize("bench", GOLDS)
def test_rewriting_misbehaviour_keeps_every_planted_answer(rate, bench):
    on = continuations(backend(bench, **{rate: 1.0}))
    off = continuations(backend(bench))
    assert [c.text for c in on] != [c.text for c in off]
    assert [answers.extract(c.text, bench) for c in on] == [answers.extract(c.text, bench) for c in off]


@pytest.mark.parametrize(
    "bench,gold,written",
    [
        ("math500", "\\frac{3}{4}", "\\boxed{\\dfrac{3}{4}}"),
        ("math500", "\\frac{\\sqrt{3}}{2}", "\\boxed{\\dfrac{\\sqrt{3}}{2}}"),
        ("math500", "12", "\\boxed{12\\text{ cm}}"),
        ("math500", "-2.5", "\\boxed{-2.5\\text{ cm}}"),
        ("gsm8k", "1250", "\\$1250"),
        ("gsm8k", "2.5", "\\$2.5"),
    ],
)
def test_latex_forms_extract_to_the_gold(bench, gold, written):
    b = SimulatedBackend({"Q": gold}, bench, Planted(latex_rate=1.0, accuracy_monotone=1.0, accuracy_nonmonotone=1.0))
    ((chain,),) = b.generate(
        [Request(tuple(b.tokenizer.chat_prompt_ids("Solve.", "Q")), 1, Sampling(0.7, BUDGET), 0, "reference")]
    )
    assert chain.text.endswith(f"The final answer is {written}.")
    assert answers.extract(chain.text, bench).answer == answers.normalize(gold, bench)


def test_non_ascii_text_round_trips_through_the_byte_tokenizer():
    b = backend("math500", non_ascii_rate=1.0)
    texts = references(b) + continuations(b)
    assert all(b.tokenizer.decode(c.token_ids) == c.text for c in texts)
    assert all(len(c.token_ids) > len(c.text) for c in texts)  # several bytes to a character
    # a budget may cut a chain inside a character, which then decodes to U+FFFD (as a real
    # byte-level tokenizer's decode does); text and ids still agree
    cut = [c for budget in range(40, 60) for c in references(b, budget=budget)]
    assert all(c.finish_reason == "length" and b.tokenizer.decode(c.token_ids) == c.text for c in cut)
    assert any("\ufffd" in c.text for c in cut)


def test_an_unanswered_chain_keeps_the_planted_truth_of_its_prefixes():
    """The chain in words parses to the same plan as the chain in digits, so its prefixes are
    continued with the same planted answers."""
    stated, unstated = backend("gsm8k"), backend("gsm8k", unanswered_rate=1.0)
    assert [answers.extract(c.text, "gsm8k") for c in continuations(unstated)] == [
        answers.extract(c.text, "gsm8k") for c in continuations(stated)
    ]
    assert all("one" in c.text.split("\n")[0] for c in references(unstated))  # "Step one: ..."


def test_a_cut_chain_fills_its_budget_and_stops_inside_a_number():
    b = backend("gsm8k", cut_rate=1.0)
    for budget in (200, 600, 1280):
        for chain in references(b, budget=budget):
            assert len(chain.token_ids) == budget and chain.finish_reason == "length"
            assert re.search(r"running value is \d{2}$", chain.text)


@pytest.mark.parametrize(
    "rate,texts,shows,planted",
    [
        ("unanswered_rate", references, MISBEHAVIOURS["unanswered"][2], 0.10),
        ("cut_rate", references, MISBEHAVIOURS["cut mid-number"][2], 0.05),
        ("empty_rate", continuations, MISBEHAVIOURS["empty"][2], 0.05),
    ],
)
def test_planted_rates_are_recovered(rate, texts, shows, planted):
    out = texts(backend("gsm8k", n_questions=600, **{rate: planted}))
    share = sum(shows(c, "gsm8k") for c in out) / len(out)
    assert abs(share - planted) < 4 * math.sqrt(planted * (1 - planted) / len(out))


def test_answers_do_not_depend_on_the_batch_or_its_order():
    b = backend("math500", n_questions=10, **{name: 0.3 for name in MISBEHAVIOUR})
    chains = [
        Request(tuple(b.tokenizer.chat_prompt_ids("Solve.", q)), 1, Sampling(0.7, 600), s, "reference")
        for q in b.golds
        for s in (0, 1)
    ]
    requests = chains + continuation_requests(b)
    together = b.generate(requests)
    assert b.generate(requests[::-1])[::-1] == together
    assert [b.generate([r])[0] for r in requests] == together


def test_misbehaviour_off_keeps_the_model_revision_and_on_changes_it():
    assert revision(Planted()) == "simulated-94edc27ed9e6c29a"  # the revision before misbehaviour existed
    assert revision(Planted(unanswered_rate=0.1)) != revision(Planted())


@pytest.mark.parametrize(
    "rates", [{"empty_rate": 1.5}, {"latex_rate": -0.1}, {"unanswered_rate": 0.6, "cut_rate": 0.5}]
)
def test_impossible_rates_are_refused(rates):
    with pytest.raises(ValueError, match="planted"):
        Planted(**rates)


def test_the_simulated_panel_has_at_least_5_percent_unanswered_chains(data_dir):
    config = yaml.safe_load((ROOT / "config/simulated.yaml").read_text())
    planted = config["models"]["qwen7b"]["planted"]
    unanswered, total = 0, 0
    for name, file in [("gsm8k", "gsm8k_test.jsonl"), ("math500", "math500_test.jsonl")]:
        problems = load_benchmark({"kind": name, "path": data_dir / file})
        b = SimulatedBackend({p.question: p.gold for p in problems}, name, Planted(**planted))
        chains = references(b, seeds=(0,), budget=600)
        unanswered += sum(answers.extract(c.text, name).status == answers.NO_ANSWER for c in chains)
        total += len(chains)
    assert unanswered / total >= 0.05
