"""Step information gain (seed 000): instances, training, gain arithmetic, thresholds, the ORM's loss,
a planted erroneous step found, and the LoRA supervisor of real chains."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from factories import records_frame
from sklearn.metrics import confusion_matrix, roc_curve

from cotdyn.methods.infogain import baselines, gain, supervisor
from cotdyn.methods.infogain.supervisor import IGNORE_INDEX

# ---------------------------------------------------------------------------------------------
# Training instances: prompt || step 1 || ... || step t #|> answer, loss on the answer only.

SEP, ANS, BOS, PAD = 90, 91, 92, 93


def test_instance_layout_and_answer_only_labels():
    inst = supervisor.build_instance([1, 2], [[10, 11], [20]], 2, [7, 8], [SEP], [ANS])
    assert inst.input_ids == (1, 2, SEP, 10, 11, SEP, 20, ANS, 7, 8)
    assert inst.labels == (IGNORE_INDEX,) * 8 + (7, 8)


def test_instance_prefix_length_and_count():
    chain = supervisor.chain_instances([1], [[10], [20], [30]], [7], [SEP], [ANS])
    assert len(chain) == 4  # t = 0..T
    assert chain[0].input_ids == (1, ANS, 7)  # no step at t = 0
    for t, inst in enumerate(chain):
        assert inst.input_ids.count(SEP) == t
        assert [i for i, lab in zip(inst.input_ids, inst.labels) if lab != IGNORE_INDEX] == [7]


def test_instance_errors():
    with pytest.raises(ValueError, match="t must be in 0..1"):
        supervisor.build_instance([1], [[10]], 2, [7], [SEP], [ANS])
    with pytest.raises(ValueError, match="the answer has no token"):
        supervisor.build_instance([1], [[10]], 1, [], [SEP], [ANS])


def _gpt2(seed: int = 0):
    """A randomly initialised one-layer GPT-2 (dropout off) over ids 0..PAD."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=PAD + 1, n_positions=32, n_embd=16, n_layer=1, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=BOS, eos_token_id=ANS)  # fmt: skip
    torch.manual_seed(seed)
    return GPT2LMHeadModel(config)


@pytest.fixture(scope="module")
def tiny_lm():
    return _gpt2()


def _chain(x, steps, y):
    return supervisor.chain_instances([BOS, *map(int, x)], [[int(s)] for s in steps], list(map(int, y)), [SEP], [ANS])


def _ce(model, instances, batch_size=256) -> np.ndarray:
    """l_CE(Y, g_sup(X_t)) per instance, as the supervisor scores it (``lora.score_text_chains``)."""
    model.eval()
    with torch.no_grad():
        return np.concatenate(
            [
                supervisor.supervisor_loss(model, supervisor.pad_batch(instances[i : i + batch_size], PAD)).numpy()
                for i in range(0, len(instances), batch_size)
            ]
        )


def _fit(model, train, val, params):
    with supervisor.deterministic_torch(params.seed, params.num_threads):
        return supervisor.fit(
            model, train, val, supervisor.supervisor_loss, lambda items: supervisor.pad_batch(items, PAD), params
        )


def test_answer_ce_matches_torch_cross_entropy_on_answer_tokens(tiny_lm):
    """Independent computation: full logits, F.cross_entropy with ignore_index, row by row."""
    model = tiny_lm
    insts = _chain([1, 2, 3], [4, 5], [6, 7]) + _chain([9], [8, 7, 6], [5, 4])
    ours = _ce(model, insts, batch_size=3)
    with torch.no_grad():
        for inst, value in zip(insts, ours):
            logits = model(input_ids=torch.tensor([inst.input_ids])).logits[0, :-1]
            ref = torch.nn.functional.cross_entropy(logits, torch.tensor(inst.labels[1:]), ignore_index=IGNORE_INDEX)
            assert value == pytest.approx(float(ref), abs=1e-5)


def test_loss_ignores_everything_but_the_answer(tiny_lm):
    """A padded neighbour leaves the CE unchanged; changing an answer token changes it."""
    model = tiny_lm
    a, b = _chain([1, 2, 3], [4, 5], [6, 7])[1], _chain([1, 2, 3], [4, 5], [6, 8])[1]
    alone = _ce(model, [a])
    padded = _ce(model, [a] + _chain([3] * 5, [1] * 5, [2] * 5))[:1]
    assert alone[0] == pytest.approx(padded[0], abs=1e-6)
    assert _ce(model, [b])[0] != pytest.approx(alone[0], abs=1e-6)


@pytest.mark.slow  # trains a model
def test_supervisor_training_is_reproducible_and_restores_torch_settings():
    rng = np.random.default_rng(0)
    insts = [
        i for _ in range(20) for i in _chain(rng.integers(0, 30, 3), rng.integers(0, 30, 2), rng.integers(0, 30, 2))
    ]
    params = supervisor.TrainParams(max_epochs=2, batch_size=8, seed=5, num_threads=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # not the training's one thread, so a setting left behind shows
    outs = []
    try:
        for _ in range(2):
            model = _gpt2(seed=1)
            result = _fit(model, insts[:48], insts[48:], params)
            outs.append((_ce(model, insts).tobytes(), result.history))
        restored = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    assert outs[0] == outs[1]
    assert outs[0][1][-1]["step"] > 0
    assert restored == 2 and not torch.are_deterministic_algorithms_enabled()


@pytest.mark.slow  # trains a model
def test_information_gain_finds_the_planted_erroneous_step():
    """Planted truth: answer element t is revealed by step t (its own id range), unless the chain
    errs at step t and writes a value from a range no correct step uses. A supervisor trained on
    every prefix of every chain gains (about ln 10 / 3 nats) at each correct step and nothing at
    the erroneous one, so a chain's lowest sample-wise gain, and the aggregate gain of the chains
    that err at step k, sit at step k."""
    rng = np.random.default_rng(0)

    def chains(n):
        answers = rng.integers(0, 10, size=(n, 3)) + np.array([0, 10, 20])
        error_step = rng.integers(0, 4, size=n)  # 0: no error
        steps = answers.copy()
        wrong = error_step > 0
        steps[wrong, error_step[wrong] - 1] = rng.integers(30, 40, size=wrong.sum())
        return [_chain([], s, y) for s, y in zip(steps, answers)], error_step

    (train, _), (val, _), (test, error_step) = chains(300), chains(60), chains(200)
    model = _gpt2(seed=0)
    params = supervisor.TrainParams(max_epochs=5, batch_size=32, learning_rate=1e-2, seed=0, num_threads=1)
    _fit(model, [i for c in train for i in c], [i for c in val for i in c], params)
    ce = [_ce(model, c) for c in test]
    for k in (1, 2, 3):
        aggregate = gain.aggregate_gain_ragged([c for c, e in zip(ce, error_step) if e == k])
        assert aggregate[k - 1] < 0.1 and np.delete(aggregate, k - 1).min() > 0.4, (k, aggregate)
    lowest = np.array([np.argmin(c[:-1] - c[1:]) + 1 for c in ce])  # each chain's step of least gain
    wrong = error_step > 0
    assert np.mean(lowest[wrong] == error_step[wrong]) > 0.9
    assert gain.aggregate_gain_ragged([c for c, e in zip(ce, error_step) if e == 0]).min() > 0.4


# ---------------------------------------------------------------------------------------------
# Information-gain arithmetic.

CE = np.array([[3.0, 2.0, 1.5, 1.5], [4.0, 3.0, 3.5, 1.0], [2.0, 2.0, 1.0, 0.0]])


def test_ragged_gain_averages_over_chains_that_reach_the_step():
    means = CE.mean(axis=0)
    np.testing.assert_allclose(gain.aggregate_gain_ragged(list(CE)), means[:-1] - means[1:])
    ragged = [np.array([3.0, 2.0]), np.array([4.0, 3.0, 1.0])]
    np.testing.assert_allclose(gain.aggregate_gain_ragged(ragged), [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN or inf"):
        gain.aggregate_gain_ragged([np.array([1.0, np.nan])])
    with pytest.raises(ValueError, match="at least 2 cross-entropies"):
        gain.aggregate_gain_ragged([np.ones(1)])


# ---------------------------------------------------------------------------------------------
# Thresholds on held-out data, and detection metrics.


def _best_accuracy_sklearn(scores, labels):
    """Best accuracy of 'flag when score <= tau' from sklearn's ROC of -score."""
    fpr, tpr, _ = roc_curve(labels, -scores)
    pos, neg = labels.sum(), (~labels).sum()
    return np.max((tpr * pos + (1 - fpr) * neg) / (pos + neg))


@pytest.mark.parametrize("seed", range(5))
def test_select_threshold_attains_the_best_held_out_accuracy(seed):
    rng = np.random.default_rng(seed)
    labels = rng.random(200) < 0.4
    scores = np.round(rng.normal(np.where(labels, 0.0, 1.0), 0.7), 1)  # ties on purpose
    tau = gain.select_threshold(scores, labels)
    ours = gain.detection_metrics(scores, labels, tau)["accuracy"]
    assert ours == pytest.approx(_best_accuracy_sklearn(scores, labels))


def test_select_threshold_edge_cases():
    assert gain.select_threshold(np.zeros(5), np.array([1, 1, 1, 0, 0], dtype=bool)) == 0.0  # flag all
    assert gain.select_threshold(np.zeros(5), np.array([1, 0, 0, 0, 0], dtype=bool)) == -np.inf  # flag none
    assert gain.select_threshold(np.array([0.0, 1.0]), np.array([True, False])) == 0.5
    with pytest.raises(ValueError, match="aligned"):
        gain.select_threshold(np.zeros(3), np.zeros(2, dtype=bool))


def test_detection_metrics_match_sklearn_confusion_matrix():
    rng = np.random.default_rng(1)
    scores, labels = rng.normal(size=300), rng.random(300) < 0.3
    m = gain.detection_metrics(scores, labels, 0.1)
    tn, fp, fn, tp = confusion_matrix(labels, scores <= 0.1).ravel()
    assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (tp, fp, tn, fn)
    assert m["accuracy"] == pytest.approx((tp + tn) / 300)
    assert m["tpr"] == pytest.approx(tp / (tp + fn)) and m["fpr"] == pytest.approx(fp / (fp + tn))
    assert np.isnan(gain.detection_metrics(scores, np.zeros(300, dtype=bool), 0.0)["tpr"])


# ---------------------------------------------------------------------------------------------
# The ORM: a causal LM with a one-logit head (real.TextOrm), binary cross-entropy of its logit.


def test_orm_loss_is_binary_cross_entropy_of_the_probability(tiny_lm):
    from cotdyn.methods.infogain.real import TextOrm

    orm = TextOrm(tiny_lm, tiny_lm.config.n_embd)
    insts = [baselines.orm_instance([BOS, 1, 2, ANS], True), baselines.orm_instance([BOS, 3, ANS], False)]
    batch = baselines.collate_orm(insts, PAD)
    with torch.no_grad():
        probs = torch.sigmoid(orm(batch["input_ids"], batch["attention_mask"], batch["position_ids"])).numpy()
        loss = baselines.orm_loss(orm, batch).numpy()
    np.testing.assert_allclose(loss, -np.log([probs[0], 1 - probs[1]]), rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# The LoRA path for real chains, exercised on a tiny random Llama (CPU, two optimiser steps).


def test_lora_supervisor_trains_adapters_only_and_scores_every_prefix(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cotdyn.methods.infogain import lora

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    chains = [
        lora.TextChain("What is 3*4+5?", ("3*4 = 12", "12+5 = 17"), "17"),
        lora.TextChain("What is 2+2?", ("2+2 = 4",), "4"),
    ]
    inst = lora.text_chain_instances(tokenizer, chains[0])[2]
    gold_ids = tokenizer("17", add_special_tokens=False)["input_ids"]
    assert [lab for lab in inst.labels if lab != IGNORE_INDEX] == gold_ids
    settings = lora.LoraSettings(r=2, alpha=4, dropout=0.0, target_modules=("q_proj", "v_proj"))
    params = supervisor.TrainParams(max_epochs=1, batch_size=4, seed=0, num_threads=1)
    wrapped, result = lora.train_lora_supervisor(model, tokenizer, chains, chains[:1], settings, params)
    trainable = {n for n, p in wrapped.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert np.isfinite(result.best_val_loss) and result.history[-1]["step"] == 2
    merged = {
        k.replace("base_model.model.", "").replace(".base_layer", ""): v
        for k, v in wrapped.state_dict().items()
        if "lora_" not in k
    }
    assert set(base) <= set(merged)
    assert all(torch.equal(merged[k], v) for k, v in base.items())
    ce = lora.score_text_chains(wrapped, tokenizer, chains, settings)
    assert [len(c) for c in ce] == [3, 2] and all(np.isfinite(c).all() for c in ce)
    assert gain.aggregate_gain_ragged(ce).shape == (2,)


def test_math_shepherd_labels_from_pipeline_samples():
    import pandas as pd

    from cotdyn.methods.math_shepherd import math_shepherd_from_samples

    samples = pd.DataFrame(
        {
            "problem_id": ["a"] * 6 + ["b"] * 3,
            "prefix": [0, 0, 0, 1, 1, 1, 0, 0, 0],
            "prefix_tokens": [0, 0, 0, 9, 9, 9, 0, 0, 0],
            "answer": ["5", "6", None, "5", "5", "5.0", "1", "2", "3"],
        }
    )
    records = records_frame(problem_id=["a", "b"], gold=["5", "4"])
    labels = math_shepherd_from_samples(samples, records, "gsm8k")
    assert labels[["soft", "hard"]].values.tolist() == [[1 / 3, 1.0], [1.0, 1.0], [0.0, 0.0]]
    assert labels["n"].tolist() == [3, 3, 3]
