"""The MATH rule against MATH-500's own 500 golds (issue 27), built from the benchmark file itself.

Every gold, boxed as a model would write it and in each of its common respellings, is equivalent
to its gold under the registered rule; a perturbed value (another number, the other sign, another
letter) is not. The respellings are the spelling variants MATH-500's golds themselves use for one
another (``\\dfrac``/``\\frac``, ``,\\!``/``{,}``, ``^\\circ``/"degrees", ``\\text{(C)}``/``C``, ...).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cotdyn.grading.answers import equivalent, extract, gold_answer, normalize

ROWS = [json.loads(line) for line in open(Path(__file__).parents[1] / "data" / "math500_test.jsonl")]
GOLDS = [r["answer"] for r in ROWS]


def respellings(gold: str) -> dict[str, str]:
    """The common respellings of one gold that apply to it, by name (the gold itself included)."""
    out = {"as written": gold}

    def add(name: str, spelled: str) -> None:
        if spelled != gold:
            out[name] = spelled

    add("dfrac", gold.replace("\\frac", "\\dfrac"))
    add("tfrac", gold.replace("\\frac", "\\tfrac"))
    add("frac for dfrac", gold.replace("\\dfrac", "\\frac"))
    add("braced frac", re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", gold))
    add("braced denominator", re.sub(r"\\frac\{(\d+)\}(\d)", r"\\frac{\1}{\2}", gold))
    # a mixed number keeps its space: 1\frac{4}{5} is "1 4/5"
    add(
        "slash fraction",
        re.sub(r"(?<!\^)(\d?)\s*\\frac\{(\d+)\}\{(\d+)\}", lambda m: f"{m[1]} {m[2]}/{m[3]}".strip(), gold),
    )
    add("frac for slash", re.sub(r"(?<![\w/])(\d+)/(\d+)", r"\\frac{\1}{\2}", gold))
    add("sign inside", re.sub(r"-\\frac\{(\d+)\}", r"\\frac{-\1}", gold))
    add("no left right", gold.replace("\\left", "").replace("\\right", ""))
    add("no spaces", gold.replace(" ", ""))
    add("spaced commas", re.sub(r",(?!\\!)\s*", ", ", gold))
    add("braced circ", gold.replace("^\\circ", "^{\\circ}"))
    add("degree sign", gold.replace("^\\circ", "°"))
    add("degrees word", gold.replace("^\\circ", " degrees"))
    add("degrees text", gold.replace("^\\circ", "\\text{ degrees}"))
    add("no degrees", gold.replace("^\\circ", "").replace("\\text{ degrees}", ""))
    add("braced comma", gold.replace(",\\!", "{,}").replace("{,} ", "{,}"))
    add("plain comma", gold.replace(",\\! ", ",").replace(",\\!", ","))
    add("no separator", gold.replace(",\\! ", "").replace(",\\!", ""))
    if re.fullmatch(r"\d{4,}", gold):
        grouped = f"{int(gold):,}"
        add("comma thousands", grouped)
        add("braced thousands", grouped.replace(",", "{,}"))
        add("thin-space thousands", grouped.replace(",", "\\,"))
    add("no dollar", gold.replace("\\$", ""))
    add("dollar", "\\$" + gold if re.fullmatch(r"\d+", gold) else gold)
    add("percent", gold + "\\%" if re.fullmatch(r"\d+", gold) else gold)
    letter = re.fullmatch(r"\\text\{\((\w)\)\}", gold)
    if letter:
        add("bare letter", letter.group(1))
        add("bracketed letter", f"({letter.group(1)})")
        add("bold letter", f"\\textbf{{({letter.group(1)})}}")
    add("no text", re.sub(r"\\text\{([^{}\s][^{}]*)\}", r"\1", gold))
    add("no unit", re.sub(r"\s*\\(?:text|mbox)\{\s[^{}]*\}(\^\d)?$", "", gold))
    add("no set membership", re.sub(r"^[a-z]\s*\\in\s*", "", gold))
    add("no assignment", re.sub(r"^[a-z]\s*=\s*", "", gold))
    add("braced sqrt", re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", gold))
    add("unicode pi", gold.replace("\\pi", "π"))
    add("bmatrix", gold.replace("pmatrix", "bmatrix"))
    add("braced base", re.sub(r"_(\d+)$", r"_{\1}", gold))
    add("bare base", re.sub(r"_\{(\d+)\}$", r"_\1", gold))
    add("leading zero", re.sub(r"^\.", "0.", gold))
    add("trailing zero", gold + "0" if re.fullmatch(r"\d*\.\d+", gold) else gold)
    add("assignment", f"x = {gold}" if re.fullmatch(r"-?\d+", gold) else gold)
    return out


CASES = [(i, name, spelled) for i, gold in enumerate(GOLDS) for name, spelled in respellings(gold).items()]


def test_the_table_covers_every_gold_and_every_spelling_the_golds_use():
    assert len(GOLDS) == 500 and len({i for i, _, _ in CASES}) == 500
    names = {name for _, name, _ in CASES}
    # every respelling applies to some gold of the benchmark (none is dead code)
    assert names == set().union(*(respellings(g) for g in GOLDS))
    assert len(names) >= 35, sorted(names)


@pytest.mark.parametrize("start", range(0, len(CASES), 250))
def test_every_gold_in_every_respelling_is_its_gold(start):
    wrong = []
    for i, name, spelled in CASES[start : start + 250]:
        text = f"So the final answer is $\\boxed{{{spelled}}}$."
        found = extract(text, "math500").answer
        if not equivalent(found, GOLDS[i], "math500"):
            wrong.append((GOLDS[i], name, spelled, found, gold_answer(GOLDS[i], "math500")))
    assert not wrong, wrong


def perturbations(gold: str) -> dict[str, str]:
    """Values a model might give that are not the gold: another number, the other sign, another letter."""
    out = {}
    value = re.split(r"\\(?:text|mbox)\{\s", gold)[0]  # a unit's exponent is no value
    digits = list(re.finditer(r"\d", value))
    if digits:
        d = digits[-1]
        out["another number"] = gold[: d.start()] + str((int(d.group()) + 1) % 10) + gold[d.end() :]
    cls = gold_answer(gold, "math500")
    if re.match(r"\d|\\frac|\\sqrt|\\pi", cls) and cls != "0":
        out["other sign"] = "-" + cls
    elif cls.startswith("-") and not cls.startswith("--"):
        out["other sign"] = cls[1:]
    if re.fullmatch(r"[A-Z]", cls):
        out["another letter"] = "A" if cls != "A" else "B"
    return out


def test_a_perturbed_value_is_not_the_gold():
    cases = [(g, name, p) for g in GOLDS for name, p in perturbations(g).items()]
    assert len(cases) >= 900 and {n for _, n, _ in cases} == {"another number", "other sign", "another letter"}
    right = [
        (g, name, p) for g, name, p in cases if equivalent(extract(f"\\boxed{{{p}}}", "math500").answer, g, "math500")
    ]
    assert not right, right


def test_normalization_is_idempotent_on_every_gold_and_respelling():
    # records compare stored classes with stored golds, both already normalized, so a class
    # normalized again must stay itself
    for _, _, spelled in CASES:
        once = normalize(spelled, "math500")
        assert normalize(once, "math500") == once, spelled
