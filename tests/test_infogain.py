"""Step information gain (seed 000): instances, gain arithmetic, thresholds, baselines, the toy.

Fast tests first; the reduced toy experiment end to end is marked slow.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
import torch
from factories import records_frame
from sklearn.metrics import confusion_matrix, roc_curve

from cotdyn.methods.infogain import baselines, gain, supervisor, toy
from cotdyn.methods.infogain.experiment import chains, presets, summaries
from cotdyn.methods.infogain.supervisor import IGNORE_INDEX
from cotdyn.methods.math_shepherd import math_shepherd_labels

# ---------------------------------------------------------------------------------------------
# Training instances: prompt || step 1 || ... || step t #|> answer, loss on the answer only.

SEP, ANS = 90, 91


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


def test_instance_scored_mask_and_errors():
    inst = supervisor.build_instance([1], [[10]], 1, [50, 7, 51, 8], [SEP], [ANS], [False, True, False, True])
    assert inst.labels[-4:] == (IGNORE_INDEX, 7, IGNORE_INDEX, 8)
    with pytest.raises(ValueError, match="t must be in 0..1"):
        supervisor.build_instance([1], [[10]], 2, [7], [SEP], [ANS])
    with pytest.raises(ValueError, match="answer_scored has 1 entries for 2"):
        supervisor.build_instance([1], [[10]], 1, [7, 8], [SEP], [ANS], [True])
    with pytest.raises(ValueError, match="no answer token is scored"):
        supervisor.build_instance([1], [[10]], 1, [7], [SEP], [ANS], [False])


@pytest.fixture(scope="module")
def tiny_lm():
    vocab = supervisor.toy_vocab(40)
    return vocab, supervisor.build_gpt2_lm(vocab, supervisor.ModelSize(n_layer=1, n_head=2, n_embd=16), seed=0)


def _toy_chain(vocab, x, steps, y):
    answer = [t for j, v in enumerate(y, 1) for t in (vocab.field(j), v)]
    return supervisor.chain_instances(
        [vocab.bos, *x], [[s] for s in steps], answer, [vocab.step_sep], [vocab.answer_sep], [False, True] * len(y)
    )


def test_answer_ce_matches_torch_cross_entropy_on_answer_tokens(tiny_lm):
    """Independent computation: full logits, F.cross_entropy with ignore_index, row by row."""
    vocab, model = tiny_lm
    insts = _toy_chain(vocab, [1, 2, 3], [4, 5], [6, 7]) + _toy_chain(vocab, [9], [8, 7, 6], [5, 4])
    ours = supervisor.answer_cross_entropy(model, insts, vocab.pad, batch_size=3)
    with torch.no_grad():
        for inst, value in zip(insts, ours):
            logits = model(input_ids=torch.tensor([inst.input_ids])).logits[0, :-1]
            ref = torch.nn.functional.cross_entropy(logits, torch.tensor(inst.labels[1:]), ignore_index=IGNORE_INDEX)
            assert value == pytest.approx(float(ref), abs=1e-5)


def test_loss_ignores_everything_but_the_answer(tiny_lm):
    """Changing a context token's label (it has none) or a padded neighbour leaves the CE unchanged;
    changing an answer token changes it."""
    vocab, model = tiny_lm
    a, b = _toy_chain(vocab, [1, 2, 3], [4, 5], [6, 7])[1], _toy_chain(vocab, [1, 2, 3], [4, 5], [6, 8])[1]
    alone = supervisor.answer_cross_entropy(model, [a], vocab.pad)
    padded = supervisor.answer_cross_entropy(model, [a] + _toy_chain(vocab, [3] * 5, [1] * 5, [2] * 5), vocab.pad)[:1]
    assert alone[0] == pytest.approx(padded[0], abs=1e-6)
    assert supervisor.answer_cross_entropy(model, [b], vocab.pad)[0] != pytest.approx(alone[0], abs=1e-6)


def test_supervisor_training_is_reproducible_and_restores_torch_settings(tiny_lm):
    vocab, _ = tiny_lm
    rng = np.random.default_rng(0)
    insts = [
        i
        for _ in range(20)
        for i in _toy_chain(vocab, rng.integers(0, 30, 3), rng.integers(0, 30, 2), rng.integers(0, 30, 2))
    ]
    params = supervisor.TrainParams(max_epochs=2, batch_size=8, seed=5, num_threads=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # not the training's one thread, so a setting left behind shows
    outs = []
    try:
        for _ in range(2):
            model = supervisor.build_gpt2_lm(vocab, supervisor.ModelSize(n_layer=1, n_head=2, n_embd=16), seed=1)
            result = supervisor.train_supervisor(model, insts[:48], insts[48:], vocab.pad, params)
            outs.append((supervisor.answer_cross_entropy(model, insts, vocab.pad).tobytes(), result.history))
        restored = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    assert outs[0] == outs[1]
    assert outs[0][1][-1]["step"] > 0
    assert restored == 2 and not torch.are_deterministic_algorithms_enabled()


# ---------------------------------------------------------------------------------------------
# Information-gain arithmetic.

CE = np.array([[3.0, 2.0, 1.5, 1.5], [4.0, 3.0, 3.5, 1.0], [2.0, 2.0, 1.0, 0.0]])


def test_samplewise_gain_is_the_drop_in_cross_entropy():
    expected = np.array([[1.0, 0.5, 0.0], [1.0, -0.5, 2.5], [0.0, 1.0, 1.0]])
    np.testing.assert_allclose(gain.samplewise_gain(CE), expected)


def test_aggregate_gain_is_the_difference_of_mean_cross_entropies():
    means = CE.mean(axis=0)
    np.testing.assert_allclose(gain.aggregate_gain(CE), means[:-1] - means[1:])
    np.testing.assert_allclose(gain.aggregate_gain(CE), gain.samplewise_gain(CE).mean(axis=0))
    np.testing.assert_allclose(gain.aggregate_gain(CE, np.array([True, False, True])), [0.5, 0.75, 0.5])
    assert np.isnan(gain.aggregate_gain(CE, np.zeros(3, dtype=bool))).all()
    with pytest.raises(ValueError, match="NaN or inf"):
        gain.aggregate_gain(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="T\\+1 >= 2"):
        gain.samplewise_gain(np.ones(3))


def test_ragged_gain_averages_over_chains_that_reach_the_step():
    np.testing.assert_allclose(gain.aggregate_gain_ragged(list(CE)), gain.aggregate_gain(CE))
    ragged = [np.array([3.0, 2.0]), np.array([4.0, 3.0, 1.0])]
    np.testing.assert_allclose(gain.aggregate_gain_ragged(ragged), [1.0, 2.0])


def test_gain_by_subtask_averages_the_cells_that_carry_the_label():
    g = gain.samplewise_gain(CE)
    labels = np.array([["add", "mul", None], ["mul", "add", "add"], ["add", "add", "mul"]], dtype=object)
    out = gain.gain_by_subtask(g, labels).set_index("subtask")
    assert out.loc["add", "ig"] == pytest.approx(np.mean([1.0, -0.5, 2.5, 0.0, 1.0]))
    assert out.loc["mul", "ig"] == pytest.approx(np.mean([0.5, 1.0, 1.0]))
    assert out["n_steps"].to_dict() == {"add": 5, "mul": 3}


def test_step_error_labels_mark_the_error_step_and_every_later_step():
    labels = gain.step_error_labels(np.array([0, 1, 3, 5]), 5)
    assert labels.astype(int).tolist() == [[0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]]
    with pytest.raises(ValueError, match="error_step"):
        gain.step_error_labels(np.array([6]), 5)


def test_drop_and_fall_steps():
    assert gain.drop_step([1.0, 0.9, 0.1, 0.0], [1.0, 1.0, 1.0, 1.0]) == 3
    assert gain.drop_step([1.0, 1.0], [1.0, 1.0]) == 0
    assert gain.largest_fall_step([0.5, 0.52, 0.01, 0.0, 0.0, 0.05]) == 2
    assert gain.largest_fall_step([0.0, 0.0, 0.1]) == 0
    np.testing.assert_allclose(gain.change_scores([[0.5, 0.4, 0.9]]), [[-0.1, 0.5]])


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


def _fake_run(val_ig, test_ig, error_step_val, error_step_test):
    """A run dict whose only informative method is IG; the others are constant."""

    def traces(error_step):
        n = len(error_step)
        states = np.zeros((n, 5, 5), dtype=int)
        gold = np.where(np.asarray(error_step)[:, None] > 0, 1, 0) * np.ones((n, 5), dtype=int)
        return toy.ToyTraces("LLMx", np.zeros((n, 5), dtype=int), states, gold, np.asarray(error_step))

    def ce_from_gain(g):
        return np.concatenate([np.full((len(g), 1), 10.0), 10.0 - np.cumsum(g, axis=1)], axis=1)

    run = {"traces": {"val": traces(error_step_val), "test": traces(error_step_test)}}
    for split, g in (("val", val_ig), ("test", test_ig)):
        run[f"ce_{split}"] = ce_from_gain(np.asarray(g, dtype=float))
        for key in ("orm", "ms_soft", "ms_hard"):
            run[f"{key}_{split}"] = np.full((len(g), 6), 0.5)
    return run


def test_detection_thresholds_come_from_the_validation_split_only():
    """Val separates at tau = 0.5; test would prefer tau >= 1.5. The reported tau must be val's."""
    val = [[1.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]]
    test = [[2.0, 2.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0, 2.0]]
    rows = summaries.detection_table("LLMx", _fake_run(val, test, [3, 0], [3, 0]))
    ig = {r["subset"]: r for r in rows if r["method"] == "IG"}
    for subset in ("all", "wrong_answer"):
        assert ig[subset]["threshold"] == pytest.approx(0.5) and ig[subset]["threshold_source"] == "val"
        assert ig[subset]["val_accuracy"] == 1.0
    assert ig["wrong_answer"]["tpr"] == 0.0 and ig["wrong_answer"]["fpr"] == 0.0  # test gains all exceed val's tau


# ---------------------------------------------------------------------------------------------
# The toy problems and the five synthetic LLMs.


def _gold_reference(x, m=300):
    """The five operations written out by hand, one prompt at a time."""
    z = [int(v) for v in x]
    z[0] = (z[0] + z[4]) % m
    z[1] = (z[1] * z[0]) % m
    z[2] = (z[2] - z[1]) % m
    z[3] = (z[3] + 2 * z[2]) % m
    z[4] = (z[4] * z[3] + z[4]) % m
    return z


def test_gold_answers_follow_the_documented_operations():
    x0 = toy.sample_prompts(50, np.random.default_rng(0))
    assert toy.gold_answers(x0).tolist() == [_gold_reference(x) for x in x0]
    assert x0.min() >= 0 and x0.max() < toy.MODULUS
    x0 = toy.sample_prompts(50, np.random.default_rng(0), toy.PRIME_MODULUS)
    assert toy.gold_answers(x0, 307).tolist() == [_gold_reference(x, 307) for x in x0]
    assert x0.max() < 307 and toy.PRIME_MODULUS == 307 and all(307 % d for d in range(2, 18))


def test_the_prime_modulus_hides_the_product_and_moves_the_error_range():
    """The toy's known gap: mod 300 a product of uniform operands is 0 in 2.8% of cases (its factors
    of 2, 3 and 5 show in the operands); mod 307 only when an operand is 0. Errors stay disjoint."""
    rng = np.random.default_rng(5)
    for m, low, high in ((300, 0.02, 0.04), (307, 0.003, 0.01)):
        a, b = rng.integers(0, m, size=(2, 200_000))
        assert low < np.mean(a * b % m == 0) < high, m
    model = toy.ToyModel("LLM2", 2, error_rate=1.0, modulus=307)
    tr = toy.generate_traces(model, toy.sample_prompts(300, rng, 307), rng)
    assert tr.states[:, 1, 1].min() >= 307 and tr.states[:, 1, 1].max() < 407 == toy.error_range(307)[1]
    assert toy.error_range() == (toy.ERROR_LOW, toy.ERROR_HIGH) == (300, 400)
    assert [m.modulus for m in toy.toy_models(modulus=307)] == [307] * 5
    full, prime = presets.resolve_size("full"), presets.resolve_size("full-prime")
    assert prime.pop("modulus") == 307 and full.pop("modulus") == 300 and prime == full
    with pytest.raises(ValueError, match="modulus"):
        toy.ToyModel("x", 2, modulus=100)


@pytest.fixture(scope="module")
def toy_chains():
    x0 = toy.sample_prompts(4000, np.random.default_rng(1))
    return {m.name: (m, toy.generate_traces(m, x0, np.random.default_rng(2))) for m in toy.toy_models()}


def test_each_llm_errs_only_at_its_step_and_errors_reach_the_answer(toy_chains):
    for name, (model, tr) in toy_chains.items():
        assert set(np.unique(tr.error_step)) == {0, model.error_step}
        np.testing.assert_array_equal(tr.correct, tr.error_step == 0)
        k = model.error_step
        correct_states = np.stack([toy.apply_step(toy.prefix_state(tr, t - 1), t) for t in range(1, 6)], axis=1)
        before = np.all(tr.states[:, : k - 1] == correct_states[:, : k - 1])
        assert before, f"{name} erred before step {k}"
        wrong = tr.error_step > 0
        assert np.all(tr.states[wrong, k - 1, k - 1] >= toy.ERROR_LOW)  # disjoint error values
        assert np.all(tr.states[~wrong] == correct_states[~wrong])


def test_llm3_errs_exactly_when_z2_2_exceeds_150_and_others_at_the_rate(toy_chains):
    _, tr3 = toy_chains["LLM3"]
    np.testing.assert_array_equal(tr3.error_step == 3, tr3.states[:, 1, 1] > 150)
    for name in ("LLM1", "LLM2", "LLM4", "LLM5"):
        rate = (toy_chains[name][1].error_step > 0).mean()
        assert abs(rate - 0.5) < 4 * np.sqrt(0.25 / 4000), name


def test_in_range_errors_stay_in_range_and_differ_from_the_correct_value():
    model = toy.ToyModel("LLM2", 2, error_rate=1.0, error_values="in_range")
    x0 = toy.sample_prompts(500, np.random.default_rng(3))
    tr = toy.generate_traces(model, x0, np.random.default_rng(4))
    wrote = tr.states[:, 1, 1]
    assert wrote.max() < toy.MODULUS and np.all(wrote != toy.apply_step(toy.apply_step(x0, 1), 2)[:, 1])
    with pytest.raises(ValueError, match="error_values"):
        toy.ToyModel("x", 2, error_values="bogus")
    with pytest.raises(ValueError, match="error_step must be >= 3"):
        toy.ToyModel("x", 2, trigger="state")


# ---------------------------------------------------------------------------------------------
# Baselines.


def test_math_shepherd_soft_and_hard_labels():
    hits = np.array([[True, False, False, False], [False] * 4, [True] * 4])
    soft, hard = math_shepherd_labels(hits)
    np.testing.assert_allclose(soft, [0.25, 0.0, 1.0])
    np.testing.assert_allclose(hard, [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="N >= 1"):
        math_shepherd_labels(np.zeros((2, 0), dtype=bool))


def test_math_shepherd_with_the_generator_as_completer(toy_chains):
    """Planted truths: LLM3's wrong chains get no correct completion from any prefix; LLM2's get
    1 - p before the error step and 0 from it on; the full chain scores its own correctness."""
    _, tr3 = toy_chains["LLM3"]
    soft3, _ = chains.math_shepherd(toy_chains["LLM3"][0], tr3.subset(np.arange(400)), 10, np.random.default_rng(5))
    wrong3 = ~tr3.correct[:400]
    assert soft3[wrong3].max() == 0.0 and soft3[~wrong3].min() == 1.0
    model2, tr2 = toy_chains["LLM2"]
    soft2, hard2 = chains.math_shepherd(model2, tr2.subset(np.arange(400)), 10, np.random.default_rng(6))
    wrong2 = ~tr2.correct[:400]
    assert abs(soft2[:, :2].mean() - 0.5) < 0.05
    assert soft2[wrong2, 2:].max() == 0.0 and hard2[wrong2, 2:].max() == 0.0
    np.testing.assert_array_equal(soft2[:, 5], tr2.correct[:400].astype(float))


def test_supervisor_instances_use_every_chain_and_the_gold_answer(toy_chains):
    """Seed 000: the supervisor learns p(Y | X_t) from all chains, correct or not, scored on the gold Y."""
    _, tr = toy_chains["LLM1"]
    vocab = supervisor.toy_vocab(toy.ERROR_HIGH)
    sub = tr.subset(np.arange(6))
    assert (~sub.correct).any() and sub.correct.any()
    insts = chains.supervisor_instances(sub, vocab)
    assert len(insts) == 6 * 6
    for i, inst in enumerate(insts):
        chain, t = divmod(i, 6)
        assert [lab for lab in inst.labels if lab != IGNORE_INDEX] == sub.gold[chain].tolist()
        assert list(inst.input_ids[1:6]) == sub.x0[chain].tolist() and inst.input_ids.count(vocab.step_sep) == t


def test_orm_instances_carry_the_chain_correctness_and_end_with_the_query_token(toy_chains):
    _, tr = toy_chains["LLM4"]
    vocab = supervisor.toy_vocab(toy.ERROR_HIGH)
    sub = tr.subset(np.arange(3))
    insts = chains.orm_instances(sub, vocab)
    assert len(insts) == 3 * 6
    for i, inst in enumerate(insts):
        chain, t = divmod(i, 6)
        assert inst.label == int(sub.correct[chain])
        assert inst.input_ids[-1] == vocab.answer_sep and inst.input_ids.count(vocab.step_sep) == t
        assert vocab.answer_sep not in inst.input_ids[:-1]


def test_orm_loss_is_binary_cross_entropy_and_probabilities_are_sigmoids():
    vocab = supervisor.toy_vocab(20)
    orm = baselines.build_orm(vocab, supervisor.ModelSize(n_layer=1, n_head=2, n_embd=16), seed=0)
    insts = [
        baselines.orm_instance([vocab.bos, 1, 2, vocab.answer_sep], True),
        baselines.orm_instance([vocab.bos, 3, vocab.answer_sep], False),
    ]
    batch = baselines.collate_orm(insts, vocab.pad)
    probs = baselines.orm_probabilities(orm, insts, vocab.pad)
    ref = -np.log(np.array([probs[0], 1 - probs[1]]))
    np.testing.assert_allclose(baselines.orm_loss(orm, batch).detach().numpy(), ref, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Sizes, the whole pipeline at a toy size, the report.


def test_resolve_size_names_bad_keys():
    assert presets.resolve_size("full")["n_problems"] > presets.resolve_size("reduced")["n_problems"]
    p = presets.resolve_size({"base": "full", "n_problems": 50, "model": {"n_embd": 16}})
    assert p["n_problems"] == 50 and p["model"]["n_embd"] == 16 and p["model"]["n_layer"] == 2
    with pytest.raises(KeyError, match="n_problem"):
        presets.resolve_size({"n_problem": 5})
    with pytest.raises(KeyError, match="widht"):
        presets.resolve_size({"model": {"widht": 5}})
    with pytest.raises(ValueError, match="reduced"):
        presets.resolve_size("medium")


TINY = {
    "n_problems": 60,
    "ms_completions": 3,
    "model": {"n_layer": 1, "n_embd": 16},
    "supervisor_train": {"max_epochs": 1, "eval_every": 0},
    "orm_train": {"max_epochs": 1, "eval_every": 0},
}


@pytest.mark.slow
def test_tiny_toy_experiment_writes_byte_identical_outputs(tmp_path):
    from cotdyn.methods.infogain.experiment.run import run_toy_experiment

    first = run_toy_experiment(TINY, 3, tmp_path / "a")
    second = run_toy_experiment(TINY, 3, tmp_path / "b")
    names = sorted(p.name for p in first["files"])
    assert names == sorted(p.name for p in second["files"])
    assert {"ig_summary.csv", "table1_llm3.csv", "detection.csv", "acceptance.json", "figure3_heatmaps.png"} <= set(
        names
    )
    for name in names:
        a, b = (tmp_path / d / name for d in "ab")
        assert hashlib.sha256(a.read_bytes()).hexdigest() == hashlib.sha256(b.read_bytes()).hexdigest(), name
    ig = pd.read_csv(tmp_path / "a" / "ig_summary.csv")
    assert set(ig["llm"]) == {f"LLM{k}" for k in range(1, 6)} and set(ig["step"]) == set(range(1, 6))
    table1 = pd.read_csv(tmp_path / "a" / "table1_llm3.csv")
    assert set(table1["threshold_source"]) == {"val"}
    assert table1.loc[table1["primary"], "paper_fpr"].tolist() == [0.06, 0.54, 1.0]


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


# ---------------------------------------------------------------------------------------------
# The reduced toy experiment, end to end (seed 000 section 5.1, Figure 3, Table 1).


@pytest.fixture(scope="module")
def reduced_toy(tmp_path_factory):
    from cotdyn.methods.infogain.experiment.run import run_toy_experiment

    out = tmp_path_factory.mktemp("toy")
    return run_toy_experiment("reduced", 0, out, n_jobs=2), out


@pytest.mark.slow
def test_reduced_toy_experiment_reproduces_the_seed_pattern_for_ig_and_ms(reduced_toy):
    result, out = reduced_toy
    checks = result["acceptance"]
    for name, found in checks["ig_drop_step"].items():
        assert found["found"] == found["expected"], (name, found)
    assert checks["llm3_ms_range"]["found"] < 0.05
    t1 = result["table1"].set_index("method")[lambda d: d["primary"]]
    assert set(t1["threshold_source"]) == {"val"}
    assert t1.loc["IG", "fpr"] < 0.15 and t1.loc["IG", "tpr"] > 0.85
    assert t1.loc["MS", "fpr"] == 1.0 and t1.loc["MS", "tpr"] == 1.0
    assert (out / "figure3_heatmaps.png").stat().st_size > 0


# Measured 2026-12-01: LLM3's early-stopped ORM (seed 0, reduced size) splits its fall on wrong
# chains between step 2 (0.226) and step 3 (0.261), and which is larger depends on the CPU's MKL
# sgemm path (AVX-512: step 3, ORM fpr 0.062 against IG 0.020; AVX2 or MKL_CBWR=COMPATIBLE: step 2).
# A better-trained ORM fixes the fall but then separates the steps by the visible error value, so
# the two ORM claims cannot both hold in the reduced setting; see the acceptance notes in
# cotdyn.methods.infogain.experiment. The full-size experiment is the claim; here it is reported.
@pytest.mark.slow
@pytest.mark.xfail(reason="reduced toy: the ORM's step-2 collapse is a near-tie that depends on the CPU", strict=False)
def test_reduced_toy_experiment_reproduces_the_seed_pattern_for_the_orm(reduced_toy):
    result, _ = reduced_toy
    orm_fall = result["acceptance"]["llm3_orm_fall_step"]
    assert orm_fall["found"] == 2, orm_fall  # shows the falls per step and step 2's margin
    t1 = result["table1"].set_index("method")[lambda d: d["primary"]]
    assert t1.loc["ORM", "fpr"] > t1.loc["IG", "fpr"] + 0.1


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
