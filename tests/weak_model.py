"""A weak real model: a tiny Llama with SmolLM2's tokenizer, trained briefly on step-by-step arithmetic.

A random network writes noise, and the simulated backend always answers; neither fails the way a
real model does. This one has learned the registered chat format and the shape of a chain (steps
separated by blank lines, a final "The answer is N"), but only that: on a GSM8K or MATH-500
question it writes arithmetic on numbers of its own choosing, and in a share of its chains
(planted in the training text) it talks without ever stating a number, so those chains have no
answer. Its answers are almost never right. That mix is what the pipeline must survive.

The questions are real benchmark questions, held out from the ones a test runs, so the prompts
it meets are the kind it was trained on; the chains are synthetic.

Deterministic: the same seed gives the same training text and the same weights (one thread,
deterministic kernels). The vocabulary is SmolLM2's full 49,152 tokens, with the input and output
embeddings tied to keep the model small. The output layer over that vocabulary is most of the
cost of a step, so the loss is taken on the chain tokens only, under a sampled softmax.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from contextlib import contextmanager
from pathlib import Path

import torch

# Share of training chains that never state a number. The model's own share on benchmark
# questions drifts from it (4 of 16 reference chains with the defaults below; tests assert a mix).
NO_ANSWER_SHARE = 0.4

# Chains with no number in them: the model learns to write these too, so some chains never answer.
TALK = [
    "Let me think about this problem.",
    "First we need to understand what is asked.",
    "The question gives several quantities.",
    "We combine them in the right order.",
    "This needs more careful thought.",
    "I am not sure how to finish this.",
    "We should check the units again.",
]
OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


def held_out_questions(gsm8k: Path, math500: Path, skip: int = 100, longest: int = 600) -> list[str]:
    """Benchmark questions past the first ``skip`` (a test runs the first few): real question
    text, so the model meets in the test the kind of prompt it was trained on."""
    questions = []
    for path, key in ((gsm8k, "question"), (math500, "problem")):
        rows = [json.loads(line) for line in Path(path).read_text().splitlines()][skip:]
        questions += [r[key] for r in rows if len(r[key]) <= longest]  # long ones only cost time
    return questions


def question_numbers(question: str, rng: random.Random) -> list[int]:
    """The small integers of a question (the model's only material), or made-up ones."""
    numbers = [int(n) for n in re.findall(r"\d+", question) if int(n) < 1000]
    return numbers[:4] if len(numbers) >= 2 else [rng.randint(2, 60) for _ in range(3)]


def answered_chain(rng: random.Random, numbers: list[int]) -> str:
    """One to four arithmetic steps on the question's numbers, each its own paragraph, then the
    final answer line. Arithmetic right, reasoning absent: the answers are almost never correct."""
    value, steps = numbers[0], []
    for _ in range(rng.randint(1, 4)):
        op, operand = rng.choice(list(OPS)), rng.choice(numbers[1:])
        result = OPS[op](value, operand)
        steps.append(f"{value} {op} {operand} = {result}")
        value = result
    return "\n\n".join(steps + [f"The answer is {value}"])


def talking_chain(rng: random.Random) -> str:
    """Two to five sentences without a single digit: a chain that reaches no answer."""
    return "\n\n".join(rng.sample(TALK, rng.randint(2, 5)))


def training_texts(questions: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    """(question, chain) pairs; a NO_ANSWER_SHARE of the chains state no number."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        text = rng.choice(questions)
        chain = (
            talking_chain(rng) if rng.random() < NO_ANSWER_SHARE else answered_chain(rng, question_numbers(text, rng))
        )
        pairs.append((text, chain))
    return pairs


def encode(tokenizer, system_prompt: str, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """Each pair as (prompt ids, chain ids + end of turn), the prompt exactly as the pipeline builds it."""
    from cotdyn.protocol.prompts import ChatTokenizer

    chat = ChatTokenizer(tokenizer)
    return [
        (
            chat.chat_prompt_ids(system_prompt, q),
            tokenizer.encode(c, add_special_tokens=False) + [tokenizer.eos_token_id],
        )
        for q, c in pairs
    ]


def batch(examples: list[tuple[list[int], list[int]]], pad_id: int):
    """Right-padded ids, attention mask, and the (row, position) of every chain token to predict."""
    length = max(len(p) + len(c) for p, c in examples)
    ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    rows, positions = [], []
    for i, (prompt, chain) in enumerate(examples):
        seq = prompt + chain
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        # position t predicts token t + 1: the predictions of the chain's tokens
        rows += [i] * len(chain)
        positions += range(len(prompt) - 1, len(seq) - 1)
    rows, positions = torch.tensor(rows), torch.tensor(positions)
    return ids, mask, rows, positions, ids[rows, positions + 1]


def tiny_llama(tokenizer, width: int = 64, layers: int = 2, heads: int = 4, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        intermediate_size=4 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


@contextmanager
def deterministic(threads: int):
    """One thread count and deterministic kernels for the duration, restored afterwards."""
    old_threads, old_det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)


def output_candidates(chain_tokens: torch.Tensor, vocab: int, k: int, generator: torch.Generator):
    """The tokens the chains use, then k others drawn afresh, and the log-weight of each.

    A sampled softmax: the other 49,000 tokens must still be pushed down, and k of them at a time
    stand for all of them (each weighted by how many it represents), at a tenth of the cost of
    the full output layer, which is most of a training step on a CPU.
    """
    others = torch.ones(vocab, dtype=torch.bool)
    others[chain_tokens] = False
    others = others.nonzero().squeeze(-1)
    drawn = others[torch.randperm(len(others), generator=generator)[:k]]
    weights = torch.cat([torch.zeros(len(chain_tokens)), torch.full((len(drawn),), math.log(len(others) / len(drawn)))])
    return torch.cat([chain_tokens, drawn]), weights


def train(
    model, examples, pad_id: int, steps: int, batch_size: int, lr: float, seed: int, negatives: int = 4096
) -> list[float]:
    """AdamW with linear warmup and cosine decay; the loss on chain tokens only. Returns the losses."""
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    chain_tokens = torch.tensor(sorted({t for _, chain in examples for t in chain}))
    index = torch.full((model.config.vocab_size,), -1, dtype=torch.long)
    index[chain_tokens] = torch.arange(len(chain_tokens))  # chain tokens come first among candidates
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, 0.5 * (1 + math.cos(math.pi * s / steps)))
    )
    losses = []
    model.train()
    for _ in range(steps):
        ids, mask, rows, positions, targets = batch(rng.sample(examples, batch_size), pad_id)
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state[rows, positions]
        candidates, log_weights = output_candidates(chain_tokens, model.config.vocab_size, negatives, generator)
        logits = hidden @ model.lm_head.weight[candidates].T + log_weights
        loss = torch.nn.functional.cross_entropy(logits, index[targets])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses


def build_weak_model(
    tokenizer_dir: str | Path,
    out_dir: str | Path,
    system_prompt: str,
    questions: list[str],
    seed: int = 0,
    steps: int = 150,
    batch_size: int = 16,
    lr: float = 3e-3,
) -> dict:
    """Train the weak model and save it with its tokenizer; returns the losses and the time taken."""
    from transformers import AutoTokenizer

    started, cpu = time.perf_counter(), time.process_time()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    examples = encode(tokenizer, system_prompt, training_texts(questions, 2000, seed))
    # one thread: on 2 shared cores it ran 4x faster than two, and it fixes the reduction order
    with deterministic(threads=1):
        model = tiny_llama(tokenizer, seed=seed)
        losses = train(model, examples, tokenizer.pad_token_id, steps, batch_size, lr, seed)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"losses": losses, "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu}
