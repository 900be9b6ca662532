"""Encoding the toy's chains as token ids for the supervisor and the ORM; Math-Shepherd's labels."""

from __future__ import annotations

import numpy as np

from cotdyn.methods.infogain import toy
from cotdyn.methods.infogain.baselines import orm_instance
from cotdyn.methods.infogain.supervisor import chain_instances
from cotdyn.methods.math_shepherd import math_shepherd_labels


def toy_chain_parts(traces: toy.ToyTraces, i: int, vocab) -> tuple[list[int], list[list[int]], list[int], list[bool]]:
    """Prompt ``<bos> x_0``, steps (each the value step t wrote), answer ``A1 y1 ... A5 y5`` and the
    answer's scored mask (values only)."""
    prompt = [vocab.bos, *map(int, traces.x0[i])]
    steps = [[int(traces.states[i, t, t])] for t in range(toy.N_STEPS)]
    answer, scored = [], []
    for j in range(toy.N_ELEMENTS):
        answer += [vocab.field(j + 1), int(traces.gold[i, j])]
        scored += [False, True]
    return prompt, steps, answer, scored


def supervisor_instances(traces: toy.ToyTraces, vocab) -> list:
    """Chain-major, t-minor: instance (i, t) sits at index i * (T+1) + t."""
    out = []
    for i in range(len(traces.x0)):
        prompt, steps, answer, scored = toy_chain_parts(traces, i, vocab)
        out += chain_instances(prompt, steps, answer, [vocab.step_sep], [vocab.answer_sep], scored)
    return out


def orm_instances(traces: toy.ToyTraces, vocab) -> list:
    """``prompt || step 1 || ... || step t #|>`` with the chain's correctness, chain-major, t-minor."""
    correct = traces.correct
    out = []
    for i in range(len(traces.x0)):
        prompt, steps, _, _ = toy_chain_parts(traces, i, vocab)
        prefix = list(prompt)
        out.append(orm_instance(prefix + [vocab.answer_sep], correct[i]))
        for step in steps:
            prefix += [vocab.step_sep, *step]
            out.append(orm_instance(prefix + [vocab.answer_sep], correct[i]))
    return out


def math_shepherd(
    model: toy.ToyModel, traces: toy.ToyTraces, n_completions: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(n, T+1) soft and hard Math-Shepherd labels at t = 0..T, the generator as completer."""
    soft, hard = [], []
    for t in range(toy.N_STEPS + 1):
        answers = toy.complete_from_prefix(model, traces, t, n_completions, rng)
        s, h = math_shepherd_labels(np.all(answers == traces.gold[:, None, :], axis=2))
        soft.append(s)
        hard.append(h)
    return np.stack(soft, axis=1), np.stack(hard, axis=1)
