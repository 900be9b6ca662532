import pytest

from cotdyn.generation.backends import Request, Sampling, make_backend
from cotdyn.protocol.seeds import SAMPLE_BITS, request_seed, sample_seed


def test_request_seeds_are_spaced_for_per_sample_offsets():
    seeds = {request_seed(0, "c", f"p{i}", k, "continuation") for i in range(300) for k in range(9)}
    assert len(seeds) == 2700 and all(s % (1 << SAMPLE_BITS) == 0 for s in seeds)
    samples = {sample_seed(s, j) for s in seeds for j in range(5)}
    assert len(samples) == 5 * 2700  # unique across (problem, prefix, sample)
    assert request_seed(0, "c", "p", 3, "continuation") != request_seed(1, "c", "p", 3, "continuation")
    assert request_seed(0, "c", "p", 3, "continuation") != request_seed(0, "c", "p", 3, "reference")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return make_backend(
        {"backend": "transformers", "id": str(tiny_model_dir), "dtype": "float32", "transformers": {"batch_size": 8}}
    )


def test_chat_prompt_has_one_bos(tiny):
    ids = tiny.tokenizer.chat_prompt_ids("Solve the problem step by step.", "What is 2+3?")
    bos = tiny.tokenizer.bos_token_id
    assert ids[0] == bos and ids[1] != bos
    assert tiny.tokenizer.decode(ids, skip_special_tokens=False).startswith("<|im_start|>system\nSolve")


def _requests(tiny, seeds, n=3, max_tokens=12):
    ids = tuple(tiny.tokenizer.chat_prompt_ids("Solve.", "What is 2+3?"))
    return [Request(ids + tuple(range(100, 100 + k)), n, Sampling(0.7, max_tokens), s) for k, s in enumerate(seeds)]


def test_seeded_sampling_is_reproducible_and_ignores_the_models_generation_config(tiny):
    first = tiny.generate(_requests(tiny, [256, 512, 768]))
    again = tiny.generate(_requests(tiny, [256, 512, 768]))
    assert first == again
    # the same request in a different batch (alone) draws the same samples
    alone = tiny.generate([_requests(tiny, [256, 512, 768])[1]])
    assert alone[0] == first[1]
    other = tiny.generate(_requests(tiny, [1024, 1280, 1536]))
    assert other != first
    # the tiny model's generation_config says top_k=1 at temperature 0.01 (greedy): had it leaked,
    # the samples of one request would all be the same text
    assert len({c.token_ids for c in first[0]}) > 1
    assert all(len(c.token_ids) <= 12 for out in first for c in out)


def test_progress_moves_with_every_decode_step_and_changes_no_sample(tiny, monkeypatch):
    """Within one batch the token bar advances each step (issue 29: bars moved only per batch)."""
    import cotdyn.generation.backends.transformers.backend as backend_module

    requests = _requests(tiny, [256, 512], n=2)  # 4 rows: one batch of 8
    plain = tiny.generate(requests)
    steps = []
    real = backend_module.SeededSampler

    def counted(*args):
        sampler = real(*args)
        inner = sampler.on_step
        sampler.on_step = lambda n: (steps.append(n), inner(n))
        return sampler

    monkeypatch.setattr(backend_module, "SeededSampler", counted)
    observed = tiny.generate(requests)
    assert observed == plain
    longest = max(len(c.token_ids) for out in observed for c in out)
    assert len(steps) >= longest > 1  # one report per decode step, all inside the one batch
    assert sum(steps) >= sum(len(c.token_ids) for out in observed for c in out)


def test_effective_sampling_names_what_reaches_the_sampler(tiny):
    effective = tiny.effective_sampling(Sampling(0.7, 150))
    assert effective["temperature"] == 0.7 and effective["top_p"] == 1.0 and effective["top_k"] == 0
    assert effective["repetition_penalty"] == 1.0 and effective["generate_repetition_penalty"] == 1.0
    assert effective["max_new_tokens"] == 150 and effective["sampler"] == "cotdyn.SeededSampler"


def test_unsupported_sampling_is_an_error(tiny):
    with pytest.raises(ValueError, match="repetition_penalty"):
        tiny.generate([Request((1, 2, 3), 1, Sampling(0.7, 4, repetition_penalty=1.2), 256)])


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown backend 'tgi'"):
        make_backend({"backend": "tgi"})


def test_seeded_sampler_draws_from_the_tempered_distribution():
    import numpy as np
    import torch
    from scipy.stats import chisquare

    from cotdyn.generation.backends.transformers import SeededSampler

    logits = torch.log(torch.tensor([0.1, 0.2, 0.3, 0.4])).repeat(4000, 1)
    draws = SeededSampler(range(4000), Sampling(1.0, 1), "cpu").draw(logits).numpy()
    counts = np.bincount(draws, minlength=4)
    assert chisquare(counts, 4000 * np.array([0.1, 0.2, 0.3, 0.4])).pvalue > 1e-3
    # temperature 0.5 squares the odds: p ~ [1, 4, 9, 16] / 30
    draws = SeededSampler(range(4000), Sampling(0.5, 1), "cpu").draw(logits).numpy()
    assert chisquare(np.bincount(draws, minlength=4), 4000 * np.array([1, 4, 9, 16]) / 30).pvalue > 1e-3
    # top-k 2 never draws outside the two most likely tokens; a row's draw depends on its seed only
    draws = SeededSampler(range(500), Sampling(1.0, 1, top_k=2), "cpu").draw(logits[:500]).numpy()
    assert set(draws) == {2, 3}
    # top-p 0.5 keeps the tokens whose mass before them is under 0.5 (0.4 and 0.3), renormalized
    draws = SeededSampler(range(4000), Sampling(1.0, 1, top_p=0.5), "cpu").draw(logits).numpy()
    assert set(draws) == {2, 3}
    assert chisquare(np.bincount(draws, minlength=4)[2:], 4000 * np.array([3, 4]) / 7).pvalue > 1e-3
    alone = SeededSampler([7], Sampling(1.0, 1), "cpu").draw(logits[:1])
    assert alone.item() == SeededSampler(range(10), Sampling(1.0, 1), "cpu").draw(logits[:10])[7].item()


@pytest.mark.parametrize(
    "prompts, roots",
    [
        ([(1, 2, 3), (1, 2), (1, 2, 3, 4), (5, 6), (1, 9)], [2, 2, 2, 3, 4]),
        ([(7, 8), (7, 8), (7,)], [1, 1, 1]),  # identical prompts share one root
        ([(3,), (4,)], [0, 1]),
    ],
)
def test_prefix_roots_map_each_prompt_to_one_that_extends_it(prompts, roots):
    from cotdyn.generation.backends.transformers import prefix_roots

    assert prefix_roots(prompts) == roots


def _counting_forward(backend):
    """Count the prompt and generated tokens the model is fed, per forward call.

    A hook, not a replacement of ``forward``: generate reads forward's signature to decide whether
    to pass position ids, so a wrapper with another signature would change what it computes.
    """
    seen = []
    handle = backend.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    return seen, handle.remove


def test_shared_prefill_gives_the_samples_of_a_full_prefill_and_reads_each_chain_once(tiny, tiny_model_dir):
    full = make_backend(
        {
            "backend": "transformers",
            "id": str(tiny_model_dir),
            "dtype": "float32",
            "transformers": {"batch_size": 8, "share_prefill": False},
        }
    )
    other = tuple(tiny.tokenizer.chat_prompt_ids("Solve.", "What is 7*6?"))
    requests = _requests(tiny, [256, 512, 768], max_tokens=6) + [Request(other, 2, Sampling(0.7, 6), 1024)]
    seen, restore = _counting_forward(tiny)
    try:
        shared = tiny.generate(requests)
    finally:
        restore()
    assert shared == full.generate(requests)
    # one pass over each root (the longest nested prompt, and the other problem's prompt), then
    # at most one token per row (batch of 8 at most) and step: no row's prompt is read again
    assert sorted(n for n in seen if n > 8) == sorted([len(requests[2].prompt_ids), len(other)])
    assert sum(n for n in seen if n <= 8) <= sum(r.n for r in requests) * 6


def test_inverse_cdf_in_blocks_matches_one_cumulative_sum_over_the_vocabulary():
    import torch

    from cotdyn.generation.backends.transformers import CDF_BLOCK, inverse_cdf

    torch.manual_seed(0)
    vocab = 2 * CDF_BLOCK + 300  # a ragged last block
    weights = torch.softmax(torch.randn(64, vocab) * 3, dim=-1)
    weights[:, ::7] = 0.0  # tokens that must never be drawn
    uniforms = torch.rand(64, dtype=torch.float64)
    reference = torch.searchsorted(
        weights.double().cumsum(-1), (uniforms * weights.double().sum(-1))[:, None], right=True
    ).squeeze(-1)
    drawn = inverse_cdf(weights, uniforms)
    assert torch.equal(drawn, reference)
    assert not (drawn % 7 == 0).any()
    # a target at a row's very end (the last block all zero, padding beyond) lands on a token with weight
    weights[:, vocab - 400 :] = 0.0
    end = inverse_cdf(weights, torch.full((64,), 1.0, dtype=torch.float64))
    assert (end < vocab - 400).all() and (weights.gather(1, end[:, None]) > 0).all()


@pytest.mark.parametrize("share_prefill", [True, False])
def test_compacting_decode_gives_generates_samples_byte_for_byte(tiny_model_dir, share_prefill):
    """Finished rows leaving the batch change no sample: the same tokens, texts and finish reasons
    as Hugging Face generate, with rows stopping at every step from the first to the budget."""
    backends = {
        decode: make_backend(
            {
                "backend": "transformers",
                "id": str(tiny_model_dir),
                "dtype": "float32",
                "transformers": {"batch_size": 8, "share_prefill": share_prefill, "decode": decode},
            }
        )
        for decode in ("generate", "compacting")
    }
    # A random model almost never samples its end token: make a twentieth of the vocabulary stop,
    # so rows of one batch end at different steps and the batch is compacted several times.
    stops = set(range(2, len(backends["generate"].tokenizer.hf), 20))
    for backend in backends.values():
        backend.stop_ids = stops | backend.stop_ids
    other = tuple(backends["generate"].tokenizer.chat_prompt_ids("Solve.", "What is 7*6?"))
    requests = _requests(backends["generate"], [256, 512], n=3, max_tokens=16) + [
        Request(other, 2, Sampling(0.7, 16), 1024)
    ]
    fed = {}
    for decode, backend in backends.items():
        fed[decode], restore = _counting_forward(backend)
        try:
            fed[decode] = (backend.generate(requests), sum(fed[decode]))
        finally:
            restore()
    (before, fed_before), (after, fed_after) = fed["generate"], fed["compacting"]
    assert after == before
    lengths = [len(c.token_ids) for out in after for c in out]
    reasons = {c.finish_reason for out in after for c in out}
    assert reasons == {"stop", "length"} and len(set(lengths)) > 4, lengths
    # the model was fed fewer tokens: finished rows left the batch
    assert fed_after < fed_before


def test_batch_sizes_shrink_by_a_quarter_down_to_one():
    from cotdyn.generation.backends.row_sizes import batch_sizes, size_at_least

    assert batch_sizes(64) == [64, 48, 36, 27, 21, 16, 12, 9, 7, 6, 5, 4, 3, 2, 1]
    assert batch_sizes(1) == [1] and batch_sizes(2) == [2, 1]
    assert size_at_least(batch_sizes(64), 37) == 48 and size_at_least(batch_sizes(64), 36) == 36


def test_padded_linears_give_every_smaller_batch_the_full_batchs_rows_bit_for_bit():
    """A CPU matrix library picks kernels by size (here Linear(576, 1536) gave other last bits below
    16 rows than at 64): padded to a probed size, every row comes out as in the full batch."""
    import torch

    from cotdyn.generation.backends.row_sizes import batch_sizes, padded_linears, probe

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(576, 1536, bias=False), torch.nn.Linear(1536, 576, bias=False))
    x = torch.randn(64, 1, 576)
    with torch.no_grad():
        full = model(x)
        exact = probe(model, batch_sizes(64))
        with padded_linears(model, exact):
            padded = {rows: model(x[:rows]) for rows in range(1, 65)}
        assert all(torch.equal(out, full[: out.shape[0]]) for out in padded.values())
        assert all(out.shape[0] == rows for rows, out in padded.items())
        # the hooks are gone after the block
        assert not any(m._forward_pre_hooks or m._forward_hooks for m in model)
