"""``TransformersBackend``: roots' prefill shared by their nested prefix requests, finished rows
dropped from the batch, each row sampled from its own generator."""

from __future__ import annotations

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
from cotdyn.generation.backends.transformers.sampler import SeededSampler
from cotdyn.generation.backends.transformers.weights import loaded_weights, local_revision
from cotdyn.protocol.prompts import ChatTokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# "compacting": finished rows leave the batch; "generate": Hugging Face generate (the earlier path)
DECODERS = ("compacting", "generate")


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
        self.model_revision = revision or local_revision(Path(model_id))
        self.weights = loaded_weights(model_id, revision)  # the manifest's record; regeneration checks it
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
            "tokenizer_sha256": self.tokenizer.vocab_sha256(),
            **self.weights,
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

    def generate(self, requests: Sequence[Request], desc: str = "", done=None, on_done=None) -> list[list[Completion]]:
        """Rows in batches of ``batch_size``, fixed by the requests alone (``done`` changes none).

        ``on_done`` hears of each row the step it finishes (``decode: compacting``; at its batch's
        end with ``decode: generate``). A batch whose rows are all ``done`` is skipped; one with
        some is decoded from the same prompts, the done rows finished from the start, so the others
        see the padding and the row sizes they had (their bits do not depend on finished rows,
        ``row_sizes``) and the done rows leave the batch at its first compaction.
        """
        done = done or {}
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
        label = desc or "generate"
        # finished rows move only at a batch's end; the token bar moves with every decode step
        with (
            tqdm(total=len(rows), desc=label, unit="sample") as bar,
            tqdm(desc=f"{label}: tokens drawn", unit="tok", position=1, leave=False, mininterval=1.0) as tokens,
        ):
            for batch in batches:
                finished = [ij in done for ij in batch]
                if all(finished):
                    completions = [done[ij] for ij in batch]
                else:
                    if self.share_prefill:
                        for root in dict.fromkeys(roots[i] for i, _ in batch):
                            if root not in prefilled:
                                prefilled[root] = self._prefill(requests[root].prompt_ids)
                    rooted = [(requests[i].prompt_ids, prefilled.get(roots[i])) for i, _ in batch]

                    def told(k: int, completion: Completion, batch=batch) -> None:
                        if on_done is not None:
                            on_done([(*batch[k], completion)])

                    drawn = self._generate_batch(requests, batch, rooted, tokens.update, finished, told)
                    completions = [done.get(ij, c) for ij, c in zip(batch, drawn)]
                for (i, j), completion in zip(batch, completions):
                    out[i][j] = completion
                    generated += len(completion.token_ids) if (i, j) not in done else 0
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

    def _generate_batch(
        self, requests: Sequence[Request], batch, rooted, on_step=None, finished=None, on_row=None
    ) -> list[Completion]:
        """``finished[k]``: row k is done already (decoded for the batch's shape only, never told);
        ``on_row(k, completion)``: row k is finished."""
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
        sampler = SeededSampler([requests[i].seed + j for i, j in batch], sampling, self.device, on_step)
        ids, mask, cache = ids.to(self.device), mask.to(self.device), self._row_cache(rooted, width)
        finished = finished or [False] * len(batch)

        def row_done(k: int, row: list[int]) -> None:
            if on_row is not None and not finished[k]:
                on_row(k, self._completion(row, sampling))

        with torch.no_grad():
            if self.decode == "generate":  # every row stays until the longest stops: told at the end
                rows = self._hf_generate(ids, mask, cache, sampler, sampling)
                for k, row in enumerate(rows):
                    row_done(k, row)
            else:
                rows = self._compacting_decode(ids, mask, cache, sampler, sampling, finished, row_done)
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

    def _compacting_decode(
        self, ids, mask, cache, sampler: SeededSampler, sampling: Sampling, finished=None, row_done=None
    ) -> list[list[int]]:
        """generate()'s sampling loop, step for step, except that finished rows leave the batch.

        Each step feeds the model what ``generate`` feeds it (the uncached tokens, the left-padded
        attention mask, or none when no row is padded, positions counted from the mask, logits of
        the last position only), and each running row draws from its own generator once a step, so
        a row's tokens are the ones ``generate`` gives it. When the running rows fit a smaller of
        the batch's sizes (``row_sizes``), the batch and its keys and values shrink to it (finished
        rows fill what the running ones leave), and every linear layer is fed its rows padded to a
        size that computes them as the full batch did. Rows ``finished`` are not live from the first
        step (a resumed batch's done rows); ``row_done(k, ids)`` is told of row k the step it stops,
        and of the rows the budget cuts.
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
        finished = finished or [False] * ids.shape[0]
        live = torch.tensor([not f for f in finished], device=ids.device)
        running = list(range(ids.shape[0]))  # batch row k is sample running[k]
        out: list[list[int]] = [[] for _ in finished]
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
                stopped = live & torch.isin(tokens, stops)
                live &= ~stopped
                if row_done is not None:
                    for k in stopped.nonzero().flatten().tolist():
                        row_done(running[k], out[running[k]])
                if step + 1 == sampling.max_tokens or not live.any():
                    if row_done is not None:  # the rows the budget cut
                        for k in live.nonzero().flatten().tolist():
                            row_done(running[k], out[running[k]])
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
