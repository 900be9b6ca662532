"""The toy experiment's problems and its five synthetic "LLMs" (seed 000, section 5.1).

The seed fixes only the skeleton: 5 sequential operations on 5-element integer vectors, five
synthetic generators LLM1-LLM5 where LLMk errs at step k, and LLM3's step-3 error triggered by the
step-2 state (``z_2[2] > 150``). Every other choice is ours and is written down here:

- Values live in ``[0, modulus)`` with ``modulus = MODULUS = 300`` by default; the prompt ``x_0`` is
  5 integers drawn uniformly from that range. Arithmetic is modulo the modulus so that the vocabulary
  stays bounded and a small supervisor cannot shortcut an operation by magnitude alone.
  Multiplication mod 300 keeps structure (300 = 2^2 3 5^2: 2.8% of products are 0, and a product's
  factors of 2, 3 and 5 are visible in its operands), which a wider supervisor partly learns from
  the prompt, so the multiply step reveals less than it should. ``PRIME_MODULUS = 307`` is the
  documented fix (``modulus`` in a ``ToyModel`` and in the presets): modulo a prime, the product of
  two uniform operands is nearly uniform (0 only when an operand is 0), so the prompt says little
  about it before the step.
- Step t (1-based) rewrites element t (1-based) only, from element t and the element step t-1 wrote
  (step 1 reads element 5), with the operation ``OPERATIONS[t-1]``. So ``z_t[t]`` is final from step
  t on, the answer ``Y = z_5`` is revealed one element per correct step, and an error at step k
  propagates into every later element. ``z_2[2]`` is read 1-based: the element step 2 writes.
- An erroneous step writes a value the correct operation could not have produced. Default
  (``error_values="disjoint"``): uniform on ``[modulus, modulus + 100)`` (``error_range``), an operation outside the span of the
  correct ones whose output is independent of every correct state (the Bayesian network of
  Assumption 3.1). ``"in_range"``: uniform on ``[0, modulus)`` minus the correct value, a harder
  variant where an error cannot be seen from the value itself.
- LLM1, LLM2, LLM4, LLM5 err at their step independently with probability ``error_rate`` (0.5);
  LLM3 errs at step 3 exactly when ``z_2[2] > 150`` (about 48% of prompts under these operations).
  No LLM errs anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODULUS = 300
PRIME_MODULUS = 307  # the smallest prime above 300 (see the module docstring)
ERROR_WIDTH = 100  # disjoint error values: [modulus, modulus + ERROR_WIDTH)
ERROR_LOW, ERROR_HIGH = MODULUS, MODULUS + ERROR_WIDTH  # the default modulus's error range
N_ELEMENTS = 5
N_STEPS = 5
LLM3_TRIGGER = 150  # seed 000, section 5.1: step 3 fails iff z_2[2] > 150
ERROR_VALUE_MODES = ("disjoint", "in_range")


def error_range(modulus: int = MODULUS) -> tuple[int, int]:
    """[low, high) of the disjoint error values under ``modulus``."""
    return int(modulus), int(modulus) + ERROR_WIDTH


def _add(own: np.ndarray, prev: np.ndarray, modulus: int) -> np.ndarray:
    return (own + prev) % modulus


def _multiply(own: np.ndarray, prev: np.ndarray, modulus: int) -> np.ndarray:
    return (own * prev) % modulus


def _subtract(own: np.ndarray, prev: np.ndarray, modulus: int) -> np.ndarray:
    return (own - prev) % modulus


def _add_twice(own: np.ndarray, prev: np.ndarray, modulus: int) -> np.ndarray:
    return (own + 2 * prev) % modulus


def _multiply_add(own: np.ndarray, prev: np.ndarray, modulus: int) -> np.ndarray:
    return (own * prev + own) % modulus


# (sub-task name, operation) for steps 1..5; the name is the sub-task label that per-sub-task
# information gain aggregates over (seed 000, section 3.4, "Sub-task-level aggregation").
OPERATIONS = (
    ("add", _add),
    ("multiply", _multiply),
    ("subtract", _subtract),
    ("add_twice", _add_twice),
    ("multiply_add", _multiply_add),
)
SUBTASKS = tuple(name for name, _ in OPERATIONS)


@dataclass(frozen=True)
class ToyModel:
    """A synthetic LLM that runs the five operations and errs only at ``error_step``.

    ``trigger="random"`` errs with probability ``error_rate``; ``trigger="state"`` errs exactly
    when the element step 2 wrote exceeds ``LLM3_TRIGGER`` (LLM3 in the seed).
    """

    name: str
    error_step: int
    trigger: str = "random"
    error_rate: float = 0.5
    error_values: str = "disjoint"
    modulus: int = MODULUS

    def __post_init__(self):
        if not 1 <= self.error_step <= N_STEPS:
            raise ValueError(f"error_step must be in 1..{N_STEPS}, got {self.error_step}")
        if self.trigger not in ("random", "state"):
            raise ValueError(f"trigger must be 'random' or 'state', got {self.trigger!r}")
        if self.trigger == "state" and self.error_step < 3:
            raise ValueError("a state trigger reads z_2[2], so error_step must be >= 3")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {self.error_rate}")
        if self.error_values not in ERROR_VALUE_MODES:
            raise ValueError(f"error_values must be one of {ERROR_VALUE_MODES}, got {self.error_values!r}")
        if self.modulus <= LLM3_TRIGGER + 1:
            raise ValueError(f"modulus must exceed the LLM3 trigger {LLM3_TRIGGER} + 1, got {self.modulus}")


def toy_models(error_rate: float = 0.5, error_values: str = "disjoint", modulus: int = MODULUS) -> tuple[ToyModel, ...]:
    """LLM1..LLM5 of seed 000, section 5.1: LLMk errs at step k; LLM3's error is state-triggered."""
    return tuple(
        ToyModel(f"LLM{k}", k, "state" if k == 3 else "random", error_rate, error_values, modulus)
        for k in range(1, N_STEPS + 1)
    )


@dataclass(frozen=True)
class ToyTraces:
    """Chains of thought of one synthetic LLM on n prompts.

    ``states[i, t-1]`` is the state z_t after step t; ``gold`` is the correct answer Y;
    ``error_step[i]`` is the step that erred (0 when none); the model's answer is ``states[:, -1]``.
    """

    model: str
    x0: np.ndarray  # (n, 5) int
    states: np.ndarray  # (n, 5 steps, 5 elements) int
    gold: np.ndarray  # (n, 5) int
    error_step: np.ndarray  # (n,) int, 0 = no error

    @property
    def answer(self) -> np.ndarray:
        return self.states[:, -1]

    @property
    def correct(self) -> np.ndarray:
        return np.all(self.answer == self.gold, axis=1)

    def subset(self, index: np.ndarray) -> ToyTraces:
        return ToyTraces(self.model, self.x0[index], self.states[index], self.gold[index], self.error_step[index])


def sample_prompts(n: int, rng: np.random.Generator, modulus: int = MODULUS) -> np.ndarray:
    """x_0: n vectors of 5 integers uniform on [0, modulus)."""
    return rng.integers(0, modulus, size=(n, N_ELEMENTS))


def apply_step(state: np.ndarray, step: int, modulus: int = MODULUS) -> np.ndarray:
    """The correct operation lambda_step applied to a batch of states (n, 5); returns a new array."""
    _, op = OPERATIONS[step - 1]
    out = state.copy()
    out[:, step - 1] = op(state[:, step - 1], state[:, step - 2], modulus)  # step 1 reads element 5 (index -1)
    return out


def gold_answers(x0: np.ndarray, modulus: int = MODULUS) -> np.ndarray:
    """Y = lambda_5 o ... o lambda_1 (x_0), the correct final state."""
    state = np.asarray(x0)
    for step in range(1, N_STEPS + 1):
        state = apply_step(state, step, modulus)
    return state


def _errs(model: ToyModel, state: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if model.trigger == "state":
        return state[:, 1] > LLM3_TRIGGER  # z_2[2], 1-based: the element step 2 wrote
    return rng.random(len(state)) < model.error_rate


def _error_values(model: ToyModel, correct: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if model.error_values == "disjoint":
        return rng.integers(*error_range(model.modulus), size=len(correct))
    return (correct + rng.integers(1, model.modulus, size=len(correct))) % model.modulus


def run_steps(
    model: ToyModel, state: np.ndarray, first_step: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``model`` from ``state`` (the state after step first_step-1) through step 5.

    Returns (states (n, 6 - first_step, 5), erred (n,) bool). Used both to generate chains
    and as Math-Shepherd's completer, so the completer is exactly the generator.
    """
    state = np.asarray(state)
    states, erred = [], np.zeros(len(state), dtype=bool)
    for step in range(first_step, N_STEPS + 1):
        nxt = apply_step(state, step, model.modulus)
        if step == model.error_step:
            # the trigger must be drawn for every row, so that rng consumption is batch-independent
            errs = _errs(model, state, rng)
            wrong = _error_values(model, nxt[:, step - 1], rng)
            nxt[:, step - 1] = np.where(errs, wrong, nxt[:, step - 1])
            erred |= errs
        states.append(nxt)
        state = nxt
    return np.stack(states, axis=1) if states else np.empty((len(state), 0, N_ELEMENTS), dtype=int), erred


def generate_traces(model: ToyModel, x0: np.ndarray, rng: np.random.Generator) -> ToyTraces:
    """One chain of thought per prompt from ``model``."""
    x0 = np.asarray(x0)
    states, erred = run_steps(model, x0, 1, rng)
    error_step = np.where(erred, model.error_step, 0)
    return ToyTraces(model.name, x0, states, gold_answers(x0, model.modulus), error_step)


def prefix_state(traces: ToyTraces, t: int) -> np.ndarray:
    """z_t for every trace (z_0 = x_0)."""
    return traces.x0 if t == 0 else traces.states[:, t - 1]


def complete_from_prefix(
    model: ToyModel, traces: ToyTraces, t: int, n_completions: int, rng: np.random.Generator
) -> np.ndarray:
    """Final answers of ``n_completions`` completions from each trace's state z_t: (n, N, 5)."""
    start = prefix_state(traces, t)
    if t == N_STEPS:  # nothing left to complete: the chain's own answer
        return np.repeat(start[:, None, :], n_completions, axis=1)
    repeated = np.repeat(start, n_completions, axis=0)
    states, _ = run_steps(model, repeated, t + 1, rng)
    return states[:, -1].reshape(len(start), n_completions, N_ELEMENTS)


def split_indices(n: int, fractions: tuple[float, float, float], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A seeded random split of n prompts into train / val / test (sorted index arrays)."""
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    order = rng.permutation(n)
    n_train = int(round(fractions[0] * n))
    n_val = int(round(fractions[1] * n))
    parts = {"train": order[:n_train], "val": order[n_train : n_train + n_val], "test": order[n_train + n_val :]}
    for name, idx in parts.items():
        if len(idx) == 0:
            raise ValueError(f"split '{name}' is empty for n={n}, fractions={fractions}")
    return {name: np.sort(idx) for name, idx in parts.items()}
