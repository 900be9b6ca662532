"""A served model: an OpenAI-compatible completions server a lab already runs (docs/your-study.md).

The study's side holds the tokenizer (``id`` at ``revision``, as for the vLLM backend): prompts are
built and sent as token ids, so a prefix reaches the model token-exact, and the generated ids are
read back from the response, never re-tokenized from its text. A server that returns no ids is an
error, named, on its first answer.

Two servers are spoken to, each in its own fields (``DIALECTS``, the model entry's
``openai_compat.server``):

- ``vllm`` (``vllm serve``): ``POST /v1/completions`` with ``"return_token_ids": true``; the ids
  are each choice's ``token_ids`` (vLLM >= 0.10.2), and the choice's ``prompt_token_ids`` are
  checked against the ids sent. ``top_k`` and ``repetition_penalty`` are vLLM's extra sampling
  fields; ``stop_token_ids`` names the model's stop ids, so its generation_config is not needed.
- ``llama.cpp`` (``llama-server``): its ``POST /completion``, whose OpenAI-style sibling returns no
  ids: ``"return_tokens": true`` gives ``tokens``; ``repeat_penalty``, ``n_predict``; its other
  samplers (DRY, XTC, mirostat, typical-p, min-p) written at their "off" values, and
  ``cache_prompt: false`` (a prompt is prefilled afresh, never read from another request's KV
  cache). Its answer echoes the seed used (``generation_settings.seed``), which must be the seed
  sent. Run through the whole DAG against a real llama-server by tests/test_llama_server.py.

Every sampling field is written out, each of the protocol's (``Sampling``) and every field the
server would otherwise fill from its own or the model's defaults (vLLM's serve takes a model's
generation_config for any field a request leaves out). A protocol field the server's fields cannot
express at its value is an error before any request (``request_body``); a field the server refuses
comes back as its HTTP 400, whose message is shown.

One request per sample: sample j of a request seeded s is sent with n = 1 and seed s + j (the
convention of ``cotdyn.protocol.seeds``), so no sample depends on how the server groups a request's
n. A server whose sampler honours fewer seeds (``Dialect.seeds``: llama.cpp's 2**32 - 1) is sent
(s + j) mod that count (``served_seed``), and the samples table records the seed sent
(``sent_seed``), as the audit recomputes it. Requests go out ``concurrency`` at a time (default
1), and a refused connection, a timeout, HTTP 429 or 5xx is retried ``retries`` times, waiting
``backoff_s`` x 2^attempt seconds (cotdyn.generation.backends.openai_transport, which also notices a
server gone silent). A server batches concurrent requests together, and a sample's numbers may
then depend on its batch (a llama-server with several slots; vLLM unless its batch-invariant
kernels are on): one request in flight, the default, is what makes a resumed or regenerated
sample equal to the first.

The served model cannot report its revision: the model entry declares it (``revision``, required),
and it is part of the backend's ``model_revision`` and so of every cache key, with the served name
and the server kind. ``describe`` records what the server lists for the model (``/v1/models``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cotdyn.generation.backends.base import Completion, Request, Sampling
from cotdyn.generation.backends.openai_transport import ServerError, post_json, run_watched
from cotdyn.protocol.seeds import served_seed

__all__ = ["DIALECTS", "OpenAICompatBackend", "ServerError", "post_json", "request_body", "read_answer"]


@dataclass(frozen=True)
class Dialect:
    """One server's completions endpoint: where it is, what the protocol's fields are called there,
    the other fields written at their "off" values, and where the answer's ids are."""

    path: str
    names: dict[str, str]  # Sampling field -> the server's field
    off: dict
    ids_field: str  # of a choice (vLLM) or of the response (llama.cpp)
    in_choices: bool
    stop_ids_field: str | None  # where the model's stop ids are named, if the server takes them
    # the seeds its sampler honours: 0 .. seeds - 1 (None: every seed cotdyn draws, up to 2**62);
    # each sample's seed is sent reduced into them (cotdyn.protocol.seeds.served_seed) and recorded so
    seeds: int | None = None
    seed_echo: tuple[str, ...] = ()  # where an answer says which seed was used, if it does


DIALECTS = {
    "vllm": Dialect(
        path="/v1/completions",
        names={
            "temperature": "temperature",
            "max_tokens": "max_tokens",
            "top_p": "top_p",
            "top_k": "top_k",
            "repetition_penalty": "repetition_penalty",
        },
        off={
            "n": 1,
            "min_p": 0.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "min_tokens": 0,
            "stop": [],
            "ignore_eos": False,
            "include_stop_str_in_output": False,
            "logprobs": None,
            "echo": False,
            "stream": False,
            "logit_bias": None,
            "return_token_ids": True,
        },
        ids_field="token_ids",
        in_choices=True,
        stop_ids_field="stop_token_ids",
        seeds=None,  # a Python int, torch.Generator.manual_seed's: 64 bits
    ),
    "llama.cpp": Dialect(
        path="/completion",
        names={
            "temperature": "temperature",
            "max_tokens": "n_predict",
            "top_p": "top_p",
            "top_k": "top_k",
            "repetition_penalty": "repeat_penalty",
        },
        off={
            "min_p": 0.0,
            "typical_p": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "mirostat": 0,
            "dry_multiplier": 0.0,
            "xtc_probability": 0.0,
            "top_n_sigma": -1.0,
            "stop": [],
            "ignore_eos": False,
            "n_probs": 0,
            "stream": False,
            "return_tokens": True,
            # a prompt's cached KV from an earlier request is computed in other batches than a fresh
            # prefill, so its logits (and samples) may differ in the last bits: off, the cost in
            # benchmarks/llama_server_determinism.py
            "cache_prompt": False,
        },
        ids_field="tokens",
        in_choices=False,
        stop_ids_field=None,
        # its seed is a uint32_t, and 0xFFFFFFFF (LLAMA_DEFAULT_SEED) asks for a random one
        seeds=2**32 - 1,
        seed_echo=("generation_settings", "seed"),
    ),
}
# The protocol's "off" value of each Sampling field: a server without the field samples the same.
SAMPLING_OFF = {"top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0}


def request_body(server: str, model: str, prompt_ids: Sequence[int], sampling: Sampling, seed: int, stop_ids) -> dict:
    """The JSON of one sample's request: the prompt as ids, every field explicit, n = 1, its seed."""
    dialect = DIALECTS[server]
    body = {"model": model, "prompt": list(prompt_ids), "seed": seed, **dialect.off}
    for field, value in sampling.as_dict().items():
        if field in dialect.names:
            body[dialect.names[field]] = value
        elif field not in SAMPLING_OFF or value != SAMPLING_OFF[field]:
            raise ServerError(f"openai_compat: a {server} server has no field for {field} = {value!r}")
    if dialect.stop_ids_field:
        body[dialect.stop_ids_field] = sorted(stop_ids)
    return body


def read_answer(server: str, answer: dict, prompt_ids: Sequence[int], where: str) -> tuple[list[int], str]:
    """(generated ids, finish reason "stop" | "length") from a server's answer to one request."""
    dialect = DIALECTS[server]
    if dialect.in_choices:
        choices = answer.get("choices") or []
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            raise ServerError(f"{where}: expected one choice (an object), got {str(choices)[:200]}")
        holder, finish = choices[0], choices[0].get("finish_reason")
        echoed = holder.get("prompt_token_ids")
        if echoed is not None and list(echoed) != list(prompt_ids):
            raise ServerError(f"{where}: the server's prompt_token_ids differ from the ids sent")
    else:
        holder = answer
        stop_type = answer.get("stop_type")
        finish = {"eos": "stop", "limit": "length", "word": "stop"}.get(stop_type, stop_type)
    ids = holder.get(dialect.ids_field)
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ServerError(
            f"{where}: the answer holds no generated token ids ('{dialect.ids_field}'); cotdyn reads ids, "
            "never re-tokenized text (vLLM: 0.10.2 or later, which honours return_token_ids; llama.cpp: "
            "its /completion with return_tokens)"
        )
    if finish not in ("stop", "length"):
        raise ServerError(f"{where}: finish reason {finish!r} (expected 'stop' or 'length')")
    return ids, finish


def served_precision(listed: dict) -> str | None:
    """The served weights' precision as the server lists them: llama-server's ``meta.ftype`` of its
    /v1/models entry (a GGUF's quantization type, "Q4_1"); vLLM lists none."""
    meta = listed.get("meta")
    ftype = meta.get("ftype") if isinstance(meta, dict) else None
    return ftype if isinstance(ftype, str) and ftype else None


def served_model(options: dict, sleep=time.sleep) -> dict:
    """What the server at ``options['base_url']`` lists for ``options['model']`` (its ``/v1/models``
    entry, less the time it was listed); a ServerError if it serves no such model."""
    base_url = options["base_url"].rstrip("/")
    answer = post_json(
        base_url + "/v1/models", None, options["timeout_s"], options["retries"], options["backoff_s"], sleep
    )
    listed = answer.get("data")
    listed = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
    for entry in listed:
        if entry.get("id") == options["model"]:
            return {k: v for k, v in entry.items() if k not in ("created",)}
    ids = ", ".join(str(e.get("id")) for e in listed) or "none"
    raise ServerError(f"{base_url}: serves {ids}, not '{options['model']}' (openai_compat.model)")


def echoed_seed(server: str, answer: dict) -> int | None:
    """The seed the server says it sampled with (llama.cpp: ``generation_settings.seed``), if it says."""
    held = answer
    for key in DIALECTS[server].seed_echo:
        held = held.get(key) if isinstance(held, dict) else None
    return held if isinstance(held, int) and not isinstance(held, bool) else None


class OpenAICompatBackend:
    name = "openai_compat"

    def __init__(self, model_id: str, revision: str, options: dict, dtype: str | None = None, sleep=time.sleep):
        from cotdyn.generation.backends.vllm import _model_eos_ids, stop_token_ids
        from cotdyn.protocol.prompts import ChatTokenizer

        if not revision:
            raise ValueError(f"openai_compat backend: model '{model_id}' needs a declared revision")
        self.model_id, self.dtype, self.options, self._sleep = model_id, dtype, dict(options), sleep
        self.server, self.served = options["server"], options["model"]
        self.base_url = options["base_url"].rstrip("/")
        self.declared_revision = revision
        self.seeds_honoured = DIALECTS[self.server].seeds
        self.model_revision = f"openai_compat-{self.server}-{self.served}@{revision}"
        from transformers import AutoTokenizer

        local = Path(model_id).is_dir()
        hf_tokenizer = AutoTokenizer.from_pretrained(model_id, **({} if local else {"revision": revision}))
        self.tokenizer = ChatTokenizer(hf_tokenizer)
        self.stop_ids = stop_token_ids(hf_tokenizer, [] if local else _model_eos_ids(model_id, revision))
        self.listed = self._served_model()

    def _post(self, path: str, body: dict | None) -> dict:
        o = self.options
        return post_json(self.base_url + path, body, o["timeout_s"], o["retries"], o["backoff_s"], self._sleep)

    def _served_model(self) -> dict:
        """What the server lists for the served model; an error if it serves no such one, or at another
        precision than the study registered (where it lists one)."""
        listed = served_model(self.options, self._sleep)
        precision = served_precision(listed)
        if precision is not None and self.dtype is not None and precision != self.dtype:
            raise ServerError(
                f"{self.base_url}: serves '{self.served}' at {precision}, but the study registered dtype "
                f"{self.dtype} (cotdyn init registers what the server lists)"
            )
        return listed

    def effective_sampling(self, sampling: Sampling) -> dict:
        body = request_body(self.server, self.served, [], sampling, 0, self.stop_ids)
        fields = {k: v for k, v in body.items() if k not in ("model", "prompt", "seed")}
        return {
            "sampler": f"{self.server} server at {self.base_url}",
            **fields,
            "n": "1 per request: one request per sample",
            "seed": "per sample (cotdyn.protocol.seeds; sample j: seed + j"
            + (f", sent mod {self.seeds_honoured}: the seeds the server honours)" if self.seeds_honoured else ")"),
        }

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "server": self.server,
            "base_url": self.base_url,
            "served_model": self.served,
            "server_lists": self.listed,
            "model_id": self.model_id,
            "declared_revision": self.declared_revision,
            "revision": self.model_revision,
            # what the server serves, where it says (llama-server: the GGUF's quantization type, as the
            # cell manifest then records it); else the study's declared precision
            "dtype": served_precision(self.listed) or self.dtype,
            "dtype_source": "server"
            if served_precision(self.listed)
            else "the study's protocol (the server does not say)",
            "device": "server",
            "stop_token_ids": list(self.stop_ids),
            "seeds_honoured": self.seeds_honoured,
            "chat_template_sha256": self.tokenizer.template_sha256(),
            "tokenizer_sha256": self.tokenizer.vocab_sha256(),
        }

    def sent_seed(self, request: Request, j: int) -> int:
        """The seed sample j of ``request`` is sent with, and recorded with: reduced into the seeds the
        server honours (cotdyn.protocol.seeds.served_seed)."""
        return served_seed(request.seed + j, self.seeds_honoured)

    def generate(self, requests: Sequence[Request], desc: str = "", done=None, on_done=None) -> list[list[Completion]]:
        """Every sample its own request, ``concurrency`` at a time; completions in request order.

        ``on_done`` hears of each response as it arrives; the samples in ``done`` are not sent.
        A failed request stops the call once the responses in flight are in (and told); a server
        gone silent stops it at once (openai_transport.run_watched).
        """
        from cotdyn.generation.backends.vllm import completion

        done = done or {}
        samples = [(i, j) for i, r in enumerate(requests) for j in range(r.n) if (i, j) not in done]
        path = DIALECTS[self.server].path

        def one(ij: tuple[int, int]) -> Completion:
            r, seed = requests[ij[0]], self.sent_seed(requests[ij[0]], ij[1])
            body = request_body(self.server, self.served, r.prompt_ids, r.sampling, seed, self.stop_ids)
            where = f"{self.base_url}{path} (seed {seed})"
            answer = self._post(path, body)
            used = echoed_seed(self.server, answer)
            if used is not None and used != seed:
                raise ServerError(f"{where}: the server sampled with seed {used}, not the seed sent")
            ids, finish = read_answer(self.server, answer, r.prompt_ids, where)
            return completion(ids, finish, self.stop_ids, self.tokenizer.decode)

        for sampling in {r.sampling for r in requests}:  # a field the server lacks fails before any request
            request_body(self.server, self.served, [], sampling, 0, self.stop_ids)
        drawn: dict[tuple[int, int], Completion] = dict(done)

        def heard(ij: tuple[int, int], sample: Completion) -> None:
            drawn[ij] = sample
            if on_done is not None:
                on_done([(*ij, sample)])

        run_watched(samples, one, self.options["concurrency"], self.base_url, heard)
        return [[drawn[(i, j)] for j in range(r.n)] for i, r in enumerate(requests)]
