import math

import pytest
from scipy.stats import entropy as scipy_entropy

from cotdyn.protocol.trajectory import coherence, entropy, entropy_grid, is_monotone, majority, summarize, violations


def test_entropy_is_in_nats_over_the_empirical_distribution():
    assert entropy(["a"] * 5) == 0.0
    assert entropy(["a", "b"]) == pytest.approx(math.log(2))
    assert entropy(["a", "a", "b", "c", "c"]) == pytest.approx(scipy_entropy([2, 1, 2]))


def test_the_13_value_entropy_grid_of_up_to_5_answers():
    def h(*p):
        return -sum(x * math.log(x) for x in p)

    expected = sorted(
        {
            0.0,
            math.log(2),
            h(2 / 3, 1 / 3),
            math.log(3),
            h(3 / 4, 1 / 4),
            h(1 / 2, 1 / 4, 1 / 4),
            math.log(4),
            h(4 / 5, 1 / 5),
            h(3 / 5, 2 / 5),
            h(3 / 5, 1 / 5, 1 / 5),
            h(2 / 5, 2 / 5, 1 / 5),
            h(2 / 5, 1 / 5, 1 / 5, 1 / 5),
            math.log(5),
        }
    )
    grid = entropy_grid(5)
    assert len(grid) == 13
    assert grid == pytest.approx(expected)
    # the smallest gap: ln 2 - H(2/3, 1/3) is the finest step a rise can take at m <= 5
    assert min(b - a for a, b in zip(grid, grid[1:])) == pytest.approx(
        min(b - a for a, b in zip(expected, expected[1:]))
    )


def test_shape_and_magnitude_on_hand_made_trajectories():
    t = [1.0, 0.8, 0.805, 0.9, 0.5, 0.6]
    assert violations(t, 0.01) == 2  # +0.005 is within epsilon; +0.095 and +0.1 are rises
    assert not is_monotone(t, 0.01)
    assert violations(t, 0.2) == 0 and is_monotone(t, 0.2)
    assert coherence(t) == pytest.approx(0.4)
    assert is_monotone([0.5, 0.5, 0.505], 0.01)


def test_majority_breaks_ties_by_first_in_sample_order():
    assert majority(["b", "a", "a", "b", "c"]) == "b"
    assert majority(["c", "a", "a"]) == "a"


def test_summary_drops_null_answers_and_labels_the_last_answer_bearing_prefix():
    prefixes = [["1", "2", "3", None, None], ["4", "4", "5", "4", None], [None] * 5]
    t = summarize(prefixes, epsilon=0.01)
    assert t.points == [0, 1]
    assert t.trajectory == pytest.approx([math.log(3), scipy_entropy([3, 1])])
    assert t.pred == "4" and t.final_confidence == pytest.approx(0.75)
    assert t.monotone and t.violations == 0 and not t.excluded
    # as a sensitivity variant, null answers form a class of their own
    t = summarize(prefixes, epsilon=0.01, null_answers="class")
    assert t.points == [0, 1, 2] and t.trajectory[-1] == 0.0 and t.pred == "<null>"


def test_exclusion_rule_needs_two_answer_bearing_prefixes():
    t = summarize([["1"] * 5, [None] * 5], epsilon=0.01)
    assert t.excluded and t.monotone is None and "1 answer-bearing" in t.exclusion_reason
    assert not summarize([["1"] * 5, ["1"] * 5], epsilon=0.01).excluded
    assert summarize([], epsilon=0.01).excluded


def _multisets(m: int):
    """Every answer-count profile of m samples (the partitions of m), as a list of labels."""

    def partitions(n, largest):
        if n == 0:
            yield ()
        for first in range(min(n, largest), 0, -1):
            for rest in partitions(n - first, first):
                yield (first, *rest)

    for parts in partitions(m, m):
        yield [chr(97 + i) for i, p in enumerate(parts) for _ in range(p)]


def test_entropy_does_not_depend_on_the_order_of_the_answers():
    """Every distinct ordering of every answer profile for m up to 10 gives the same float, bit
    for bit (profiles with more than 30,000 orderings, many classes at m = 9 or 10, are left out)."""
    from collections import Counter

    from sympy.utilities.iterables import multiset_permutations

    checked = 0
    for m in range(1, 11):
        for answers in _multisets(m):
            orderings = math.factorial(m) // math.prod(math.factorial(c) for c in Counter(answers).values())
            if orderings > 30_000:
                continue
            values = {entropy(order) for order in multiset_permutations(answers)}
            assert len(values) == 1, (m, answers, values)
            checked += 1
    assert checked > 100  # and (3, 3, 2, 2) at m = 10, whose plain sum differs between orderings
