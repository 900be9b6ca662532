"""The backend interface: batched requests of token ids in, completions out (docs/reference.md section 8)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Mapping, Protocol, Sequence


class BackendFailure(RuntimeError):
    """A failure outside cotdyn that stops generation (a server's error, a server gone): its message is
    the whole story, printed as the job's one last line (cotdyn.generation.failures)."""


@dataclass(frozen=True)
class Sampling:
    """Every sampling parameter, explicit: a model's generation_config must never leak in."""

    temperature: float
    max_tokens: int
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    repetition_penalty: float = 1.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Request:
    prompt_ids: tuple[int, ...]
    n: int
    sampling: Sampling
    seed: int  # sample j is drawn with seed + j
    # What the request is for ("reference" | "continuation"). Not part of the content address:
    # a real model sees only the ids; the simulated model uses it to decide between writing a
    # chain and answering from an empty prefix.
    role: str = "continuation"

    def key(self, model_revision: str) -> str:
        """Content address: (model revision, prompt ids, sampling parameters, seed, n), the sha256 of
        their JSON list (``request_keys``)."""
        return request_keys([self], model_revision)[0]


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def request_keys(requests: Iterable[Request], model_revision: str) -> list[str]:
    """Each request's content address: sha256 of the compact JSON of ``[model_revision, prompt ids,
    sampling parameters, seed, n]``. Where a request's prompt ids extend the previous one's (the
    continuations of one chain, by prefix), the hash of the shared head is carried on rather than
    recomputed: a panel cell's keys hashed its chain's ids once per prefix."""
    head = hashlib.sha256(_compact([model_revision, []])[:-2].encode())  # '["revision",['
    keys, previous, state, closing = [], None, head, {}
    for r in requests:
        ids = tuple(r.prompt_ids)
        if previous is not None and ids[: len(previous)] == previous:  # the ids hashed so far, and more
            state, added = state.copy(), ids[len(previous) :]
            comma = "," if previous and added else ""  # between the ids hashed and those added
            state.update((comma + _compact(list(added))[1:-1]).encode())
        else:
            state = head.copy()
            state.update(_compact(list(ids))[1:-1].encode())
        previous, done = ids, state.copy()
        if r.sampling not in closing:  # '],{sampling parameters}': one JSON encoding per sampling
            closing[r.sampling] = "]," + _compact(r.sampling.as_dict())
        done.update(f"{closing[r.sampling]},{_compact(r.seed)},{_compact(r.n)}]".encode())
        keys.append(done.hexdigest())
    return keys


@dataclass(frozen=True)
class Completion:
    token_ids: tuple[int, ...]  # generated ids, without the stop token
    text: str
    finish_reason: str  # "stop" | "length"


@dataclass
class GenerationStats:
    requests: int = 0
    samples: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0
    cached_requests: int = 0
    calls: int = 0
    # samples of pending requests that an interrupted earlier run had drawn and journaled
    journaled_samples: int = 0


class Tokenizer(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str: ...
    def chat_prompt_ids(self, system_prompt: str, question: str) -> list[int]: ...


class Backend(Protocol):
    name: str
    model_revision: str
    tokenizer: Tokenizer

    def generate(
        self,
        requests: Sequence[Request],
        desc: str = "",
        done: Mapping[tuple[int, int], Completion] | None = None,
        on_done: Callable[[list[tuple[int, int, Completion]]], None] | None = None,
    ) -> list[list[Completion]]:
        """One batched call: completions[i] holds the n samples of requests[i], in order.

        ``done``: sample j of request i already drawn (by a run that was killed), by (i, j): it is
        returned as given and not drawn again, unless the backend must redraw it to give the other
        samples the bits they have in an uninterrupted run (the batch composition). ``on_done``:
        told of each sample as it finishes, as (i, j, completion) rows, one call per unit the
        backend finishes together (the generation journal, ``cotdyn.generation.journal``): the
        finished samples of a decode step, a response, a request. A row of ``done`` is not told again.
        """
        ...

    def effective_sampling(self, sampling: Sampling) -> dict:
        """The parameters actually handed to the sampler for ``sampling``."""
        ...

    def describe(self) -> dict:
        """Provenance of what generated: written as ``backend`` into every phase's generation.json,
        and from there into the cell manifest (``cotdyn.provenance.manifests.model_entry``).

        The contract, because other code reads it:

        - ``backend``: the registered name (cotdyn.generation.backends.registry).
        - ``revision``: exactly ``self.model_revision``. It is the first part of every cache key
          (``Request.key``) and names the cache folder; the seal and the audit re-key a phase's
          samples from this field (``cotdyn.generation.sealing``), so anything else breaks them.
        - ``model_id``, ``dtype``, ``device``: what the manifest reports (None where it has no
          meaning, e.g. the simulated model's dtype); ``tokenizer_sha256`` and
          ``chat_template_sha256`` for a model with a tokenizer of its own.
        - Everything else that decides which ids are sampled and is not already in the key: engine
          or server settings, the sampler's version, stop ids, planted truth. Two runs that may
          sample differently must describe themselves differently.
        - Plain JSON (str, int, float, bool, None, lists, dicts with str keys), and the same for
          the same model and settings: no times, host names, process ids or secrets (an API key is
          never recorded). The manifest is hashed and compared by the audit, so a volatile field
          would make every re-run look changed.
        """
        ...


# What every description holds (the contract above): what the manifest reports and the cache keys read.
DESCRIBED = ("backend", "revision", "model_id", "dtype", "device")
_SECRET = re.compile(r"api_?key|secret|password|authorization|bearer", re.I)


def _plain_json(value, where: str) -> list[str]:
    """Where ``value`` is not plain JSON (str, int, float, bool, None, lists, dicts with str keys)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return [] if not isinstance(value, float) or math.isfinite(value) else [f"{where}: {value} is not finite"]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _plain_json(item, f"{where}[{i}]")]
    if isinstance(value, dict):
        problems = [f"{where}: key {k!r} is not a str" for k in value if not isinstance(k, str)]
        problems += [
            f"{where}.{k}: a secret's name: an API key is never recorded" for k in value if _SECRET.search(str(k))
        ]
        return problems + [p for k, item in value.items() for p in _plain_json(item, f"{where}.{k}")]
    return [f"{where}: a {type(value).__name__}, not plain JSON"]


def describe_problems(backend: Backend, name: str) -> list[str]:
    """How ``backend.describe()`` breaks the contract of ``Backend.describe`` for a backend registered
    as ``name`` (empty: it keeps it). A plugin's own test calls it on the backend it builds."""
    described = backend.describe()
    if not isinstance(described, dict):
        return [f"describe() returned a {type(described).__name__}, not a dict"]
    problems = [f"no '{key}'" for key in DESCRIBED if key not in described]
    if described.get("backend") != name:
        problems.append(f"backend is {described.get('backend')!r}, not its registered name {name!r}")
    if described.get("revision") != backend.model_revision:
        problems.append(f"revision {described.get('revision')!r} is not model_revision {backend.model_revision!r}")
    problems += _plain_json(described, "describe()")
    if backend.describe() != described:
        problems.append("two calls describe the same backend differently (a volatile field)")
    for key in ("tokenizer_sha256", "chat_template_sha256"):
        value = described.get(key)
        if value is not None and not re.fullmatch(r"[0-9a-f]{64}", str(value)):
            problems.append(f"{key} {value!r} is not a sha256")
    return problems
