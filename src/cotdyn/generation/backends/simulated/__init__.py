"""A generator with planted ground truth (docs/reference.md section 8), for tests, calibration and benchmarks.

It writes the same text formats a real model does (blank-line separated 'Step k:' units, a final
answer line, continuations that state an answer, ``\\boxed{}`` on MATH), so segmentation and
extraction run unchanged on it. Its tokenizer is byte-level: one token per UTF-8 byte.

Planted truth, per reference chain (drawn from hashes, so every request is answered the same way
whatever the batch or the order):

- ``units``: the chain has U units, U ~ round(lognormal(log(units_median), units_sigma)), about
  ``unit_chars`` tokens each; it is truncated when its text exceeds the reference budget.
- ``monotone_share``: the share of chains whose number of distinct continuation answers never
  rises; the others get 1-3 planted rises, placed at units 1..7 so that a cap of 8 keeps them.
- ``accuracy_monotone`` / ``accuracy_nonmonotone``: P(the dominant answer is gold) in each group,
  so the planted accuracy gap is their difference.
- ``late_switch_share``: the share of incorrect chains whose dominant answer is gold until 70% of
  the chain and then switches away (seed 002's late-switch failure).
- ``null_rate``: the chance that one prefix of a monotone chain yields no answer at all.

At a prefix with u complete units, sample j of n answers with cluster (j mod d_u), d_u the planted
number of distinct answers; cluster 0 is the dominant answer, so it is also the majority. The
empty prefix answers from the question alone, with guesses that are never gold, so a correct chain
is a rescue, an incorrect one never discovers gold, and a late switch is a failed rescue (seed 002
section 4.2). A finished chain's full prefix continues with
nothing (the endpoint asymmetry of seed 003 section 5.2).

Misbehaviour, as real models write it. Every rate defaults to 0, and a rate of 0 draws
nothing, so with all of them off the output (and the model revision) is the same byte for byte.
Each is decided by a hash of what the request shows, like the planted truth above.

- Per reference chain (one draw decides at most one of the first two):
  - ``unanswered_rate``: the chain never states an answer. It is written in words ("Step two: the
    running value is forty-eight") and ends "I am not sure how to finish this.", so it holds no
    digit and extraction finds nothing; its prefixes still carry the planted truth.
  - ``cut_rate``: the chain runs on past its plan, step after step, until the reference budget
    falls inside a number; it ends in that number's first digits, with finish reason "length"
    (so the pipeline records no answer of its own; a naive last-number rule would take the cut one).
  - ``off_mode_share``: the chain states an answer that is not the dominant answer of its own
    continuations at its last unit: a chain whose dominant answer is gold states the wrong one (seed
    002's stochastic miss, when its last state is sampled from the reasoning alone), any other
    states gold (a fragile success). Continuations keep the planted truth.
- Per continuation:
  - ``empty_rate``: the model stops at once (text "", no token).
  - ``conflicting_rate``: it states a different answer first, then takes it back and states the
    planted one ("the answer is 12. Wait, that is not right: the final answer is 5.").
  - ``boxed_rate``: it boxes an intermediate quantity, then the answer (several ``\\boxed{}``;
    on GSM8K too, as real models do).
- Per chain and per continuation, each from its own hash:
  - ``latex_rate``: the stated answer is written in an equivalent LaTeX form: ``\\dfrac`` for a
    fraction, a unit for a number (``\\text{ cm}`` on MATH, ``\\$`` on GSM8K). It normalizes to
    the same answer class; answers that are neither are written as usual.
  - ``non_ascii_rate``: the text carries non-ASCII characters (accents, dashes, CJK, a check mark),
    several bytes each; a budget may cut a chain inside one.

Misbehaviour rewrites text, not the planted answers, except that an empty continuation or an
unanswered chain states none. Empty continuations still move the measured shape: the registered
rule drops a null before entropy, and a dropped sample can raise a prefix's entropy (a 3-2 split
becomes 2-2), so they lower the measured monotone coverage below ``monotone_share``.

The package: ``tokenizer`` (``ByteTokenizer``), ``planted`` (the planted truth, its revision and the
draws keyed by it), ``text`` (how the simulated chain is written), ``backend`` (``SimulatedBackend``).
Every public name is importable from here.
"""

from cotdyn.generation.backends.simulated.backend import SimulatedBackend
from cotdyn.generation.backends.simulated.planted import MISBEHAVIOUR, Planted, revision
from cotdyn.generation.backends.simulated.tokenizer import BOS, EOS, ByteTokenizer

__all__ = [
    "BOS",
    "ByteTokenizer",
    "EOS",
    "MISBEHAVIOUR",
    "Planted",
    "SimulatedBackend",
    "revision",
]
