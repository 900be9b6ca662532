import pytest

from cotdyn.generation.backends.simulated import ByteTokenizer
from cotdyn.protocol.segment import cap_units, checkpoints, segment, units

CHAIN = "Step 1: add 2 and 3.\n\nStep 2: that gives 5.\n\n\n  Step 3: double it.\nStep 4: 10.\n\nThe answer is 10."


def test_blank_line_units_are_the_registered_rule():
    spans = units(CHAIN, "blank_line")
    assert [CHAIN[a:b] for a, b in spans] == [
        "Step 1: add 2 and 3.",
        "Step 2: that gives 5.",
        "Step 3: double it.\nStep 4: 10.",
        "The answer is 10.",
    ]


def test_cap_merges_the_tail_as_the_original_text():
    spans = cap_units(units(CHAIN, "newline"), 3)
    assert len(spans) == 3
    assert CHAIN[spans[2][0] : spans[2][1]] == "Step 3: double it.\nStep 4: 10.\n\nThe answer is 10."


@pytest.mark.parametrize(
    "rule, cap, raw",
    [
        ("blank_line", 8, 4),
        ("blank_line", 2, 4),
        ("newline", 8, 5),
        ("newline", None, 5),
        ("sentence", 3, 5),
        ("step_marker", 8, 4),
        ("token_window", 8, 3),
    ],
)
def test_prefix_count_and_token_exact_prefixes(rule, cap, raw):
    tok = ByteTokenizer()
    ids = tok.encode(CHAIN)
    counts, raw_units = segment(CHAIN, ids, tok.decode, rule, cap)
    assert raw_units == raw
    assert len(counts) == min(raw_units, cap or raw_units) + 1  # prefixes k = 0..K
    assert counts[0] == 0 and counts == sorted(counts)
    for n in counts:  # each prefix's decoded ids are the chain text up to its boundary
        assert CHAIN.startswith(tok.decode(ids[:n]))


def test_prefixes_are_token_exact_with_a_real_tokenizer(smol_tokenizer_dir):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    text = "First, 12 × 3 = 36 — done.\n\nThen 36 + 4 = 40.\n\nSo the answer is 40."
    ids = hf.encode(text, add_special_tokens=False)

    def decode(x):
        return hf.decode(list(x), skip_special_tokens=True)

    counts, raw_units = segment(text, ids, decode, "blank_line", 8)
    assert raw_units == 3 and len(counts) == 4
    prefixes = [decode(ids[:n]) for n in counts]
    assert prefixes[1].rstrip() == "First, 12 × 3 = 36 — done."
    assert prefixes[2].rstrip() == "First, 12 × 3 = 36 — done.\n\nThen 36 + 4 = 40."
    assert prefixes[3] == text


def test_step_marker_rule_falls_back_to_newline_then_sentence():
    assert len(units("Step 1: a.\nStep 2: b.", "step_marker")) == 2
    assert len(units("a line.\nanother line.\nthird.", "step_marker")) == 3
    assert len(units("One sentence. Another one! A third?", "step_marker")) == 3


def test_unknown_rule_is_named():
    with pytest.raises(ValueError, match="unknown segmentation rule 'paragraph'"):
        units("x", "paragraph")


def test_empty_chain_has_only_the_empty_prefix():
    tok = ByteTokenizer()
    assert segment("", [], tok.decode, "blank_line", 8) == ([0], 0)


def test_token_checkpoints_always_include_the_last_prefix():
    assert checkpoints(40, 16) == [0, 16, 32, 40]
    assert checkpoints(32, 16) == [0, 16, 32]
    assert checkpoints(0, 16) == [0]
