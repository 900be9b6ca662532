"""An in-process llama.cpp model (llama-cpp-python): a GGUF file on a laptop's CPU, no server.

The model is a GGUF file: the entry's ``gguf: {package, file}`` (the embedded SmolLM2 ships so), or
an ``id`` naming a ``.gguf`` file (``cotdyn audit --regenerate --model`` passes a reviewer's copy
so). Prompts are token ids, built by the Hugging Face tokenizer that transformers reads from the
same GGUF file (the one the transformers backend's conversion saves, and in the workflow read from
that conversion, so a generation job needs no torch: ``tokenizer_source``), and the generated ids
are read straight from llama.cpp's sampler, never re-tokenized; a completion's text is the decode
of its ids.

How each sample is drawn, so that it depends only on (prompt, sampling, seed):

- One sample at a time, in one sequence: the prompt less its last token is prefilled once per
  request, and each sample then drops what the previous one added to the KV cache, decodes the
  last prompt token again and samples from there. A sample never shares a batch with another, and
  no request reads KV another request computed (llama-server's ``cache_prompt`` finding,
  benchmarks/llama_server_determinism.py: KV computed in other batches differs in the last bits).
- A sampler chain per sample, in the protocol's order (temperature, then top-k, then top-p, as
  Hugging Face and vLLM apply them; llama-server's default chain applies temperature last), then
  llama.cpp's seeded ``dist`` sampler; temperature 0 is greedy. ``repetition_penalty`` other than
  1.0 is refused, as the transformers backend refuses it (llama.cpp's penalty counts a window of
  accepted tokens, not the whole context).
- Seeds: ``llama_sampler_init_dist`` takes a uint32_t and reads 0xFFFFFFFF as "draw a random one",
  so sample j of a request seeded s is drawn with (s + j) mod (2**32 - 1) (``served_seed``), as a
  llama-server is sent, and the samples table records that seed.

The AMX workaround (``use_extra_bufts = False``). llama.cpp 0.3.36 built for a CPU with AMX
(-march=native on a Sapphire Rapids Xeon) crashes in its AMX matrix kernels on the first decode
when weights are repacked into its extra buffer types, llama.cpp's default. llama-cpp-python's
``Llama()`` has no argument for it (llama-server's ``--no-repack``), so the model is loaded
through llama-cpp-python's own wrappers of the C API with ``llama_model_params.use_extra_bufts``
off. It is off on every CPU, not only where AMX is: weights then go through one kernel path,
whatever extra buffer types a CPU offers, and ``describe()`` names the setting (``weight_repacking``),
so every generation.json and cell manifest says which path drew the samples.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from cotdyn.generation.backends.base import Completion, Request, Sampling
from cotdyn.generation.backends.gguf_file import locate_gguf
from cotdyn.protocol.seeds import served_seed
from cotdyn.provenance.manifests import file_sha256

# llama_sampler_init_dist's seed is a uint32_t, and 0xFFFFFFFF (LLAMA_DEFAULT_SEED) asks for a random one
LLAMA_SEEDS = 2**32 - 1
WEIGHT_REPACKING = (
    "off (llama_model_params.use_extra_bufts = False): llama.cpp 0.3.36 crashes in its AMX kernels on the "
    "first decode when weights are repacked, on a CPU with AMX; off everywhere, so one kernel path draws"
)
SAMPLER_CHAIN = "temperature, top_k, top_p, dist (seeded); greedy at temperature 0"


def gguf_path(entry: dict) -> Path:
    """The GGUF file of a model entry: ``id`` when it names a .gguf file, else the packaged
    ``gguf: {package, file}``. (The workflow points ``id`` at the transformers conversion of a
    packaged GGUF, a folder: this backend reads the GGUF itself.)"""
    named = entry.get("id")
    if named and str(named).endswith(".gguf"):
        path = Path(named)
        if not path.is_file():
            raise FileNotFoundError(f"backend llama_cpp: model id {named} is not a file")
        return path
    packaged = entry.get("gguf")
    if not isinstance(packaged, dict):
        raise ValueError(
            "backend llama_cpp loads a GGUF file: give 'gguf: {package, file}' or an 'id' naming a .gguf file"
        )
    return locate_gguf(packaged["package"], packaged["file"])


def tokenizer_source(entry: dict, path: Path, sha256: str) -> tuple[Path, dict]:
    """Where the Hugging Face tokenizer is read, as (folder, from_pretrained keywords): the workflow's
    conversion of this very GGUF when the entry's ``id`` is one (a folder whose SOURCE names the
    file's sha256; rule prepare_model saves the tokenizer there), which needs no torch; else the GGUF
    itself, which transformers reads only with torch installed. The same tokenizer either way."""
    named = entry.get("id")
    source = Path(named) / "SOURCE" if named else None
    if source is not None and source.is_file() and f"sha256={sha256}" in source.read_text():
        return Path(named), {}
    return path.parent, {"gguf_file": path.name}


def check_sampling(sampling: Sampling) -> None:
    if sampling.repetition_penalty != 1.0:
        raise ValueError("llama_cpp backend: repetition_penalty other than 1.0 is not supported")


def sampler_for(sampling: Sampling, seed: int):
    """llama.cpp's sampler chain for one sample, in the protocol's order (see the module docstring)."""
    from llama_cpp._internals import LlamaSampler

    chain = LlamaSampler()
    if sampling.temperature == 0:
        chain.add_greedy()
        return chain
    chain.add_temp(sampling.temperature)
    if sampling.top_k > 0:
        chain.add_top_k(sampling.top_k)
    if sampling.top_p < 1.0:
        chain.add_top_p(sampling.top_p, 1)
    chain.add_dist(seed)
    return chain


class LlamaCppBackend:
    name = "llama_cpp"

    def __init__(self, entry: dict, options: dict):
        import llama_cpp
        from llama_cpp._internals import LlamaBatch
        from transformers import AutoTokenizer

        from cotdyn.generation.backends.vllm import tokenizer_sha256
        from cotdyn.protocol.prompts import ChatTokenizer

        self.path = gguf_path(entry)
        packaged = entry.get("gguf") if not str(entry.get("id", "")).endswith(".gguf") else None
        self.model_id = f"{packaged['package']}/{packaged['file']}" if packaged else str(self.path)
        self.n_ctx, self.threads = int(options["n_ctx"]), options.get("threads")
        self.weights_sha256 = file_sha256(self.path)
        self.model_revision = f"gguf-{self.weights_sha256[:16]}"
        self.seeds_honoured = LLAMA_SEEDS
        self.version = llama_cpp.__version__
        folder, where = tokenizer_source(entry, self.path, self.weights_sha256)
        hf_tokenizer = AutoTokenizer.from_pretrained(folder, **where)
        self.tokenizer = ChatTokenizer(hf_tokenizer)
        self._tokenizer_sha256 = tokenizer_sha256(hf_tokenizer)
        self.model, self.context = load(self.path, self.n_ctx, self.threads)
        self.batch = LlamaBatch(n_tokens=self.context.params.n_batch, embd=0, n_seq_max=1, verbose=False)
        self.file_type = file_type(self.model)
        registered = entry.get("dtype")
        if registered is not None and self.file_type is not None and registered != self.file_type:
            raise ValueError(
                f"backend llama_cpp: {self.path.name} holds {self.file_type} weights, but the study registered "
                f"dtype {registered} (cotdyn init registers the file's)"
            )
        self.stop_ids = stop_ids(self.model, hf_tokenizer.eos_token_id)

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model_id": self.model_id,
            "revision": self.model_revision,
            "weights_sha256": self.weights_sha256,
            "dtype": self.file_type,  # the GGUF's quantization, as the cell manifest records it
            "device": "cpu",
            "llama_cpp_python": self.version,
            "n_ctx": self.n_ctx,
            "weight_repacking": WEIGHT_REPACKING,
            "sampler_chain": SAMPLER_CHAIN,
            "stop_token_ids": list(self.stop_ids),
            "seeds_honoured": self.seeds_honoured,
            "chat_template_sha256": self.tokenizer.template_sha256(),
            "tokenizer_sha256": self._tokenizer_sha256,
        }

    def effective_sampling(self, sampling: Sampling) -> dict:
        check_sampling(sampling)
        return {
            "sampler": f"llama.cpp in process (llama-cpp-python {self.version}): {SAMPLER_CHAIN}",
            "temperature": sampling.temperature,
            "top_k": sampling.top_k,
            "top_p": sampling.top_p,
            "repetition_penalty": sampling.repetition_penalty,
            "max_tokens": sampling.max_tokens,
            "n": "one sample at a time, each from the prompt's own prefill",
            "seed": f"per sample (cotdyn.protocol.seeds; sample j: seed + j, mod {LLAMA_SEEDS}: a uint32 seed)",
        }

    def sent_seed(self, request: Request, j: int) -> int:
        """The seed sample j of ``request`` is drawn with, and recorded with (``served_seed``)."""
        return served_seed(request.seed + j, self.seeds_honoured)

    def generate(self, requests: Sequence[Request], desc: str = "", done=None, on_done=None) -> list[list[Completion]]:
        """Each request's samples in turn, one at a time; ``on_done`` hears of each as it finishes,
        and the samples in ``done`` are not drawn (no other sample depends on them)."""
        from tqdm import tqdm

        done = done or {}
        for sampling in {r.sampling for r in requests}:  # refused before any sample is drawn
            check_sampling(sampling)
        drawn: dict[tuple[int, int], Completion] = dict(done)
        todo = sum(1 for i, r in enumerate(requests) for j in range(r.n) if (i, j) not in done)
        with tqdm(total=todo, desc=desc or "llama_cpp", unit="sample", disable=not desc) as bar:
            for i, request in enumerate(requests):
                pending = [j for j in range(request.n) if (i, j) not in done]
                if not pending:
                    continue
                self._prefill(request.prompt_ids, request.sampling.max_tokens)
                for j in pending:
                    drawn[(i, j)] = self._sample(request, self.sent_seed(request, j))
                    bar.update(1)
                    if on_done is not None:
                        on_done([(i, j, drawn[(i, j)])])
        return [[drawn[(i, j)] for j in range(r.n)] for i, r in enumerate(requests)]

    def _prefill(self, prompt_ids: Sequence[int], max_tokens: int) -> None:
        """A fresh KV cache holding the prompt less its last token."""
        if not prompt_ids:
            raise ValueError("llama_cpp backend: an empty prompt")
        if len(prompt_ids) + max_tokens > self.n_ctx:
            raise ValueError(
                f"llama_cpp backend: a prompt of {len(prompt_ids)} tokens plus max_tokens {max_tokens} exceeds "
                f"n_ctx {self.n_ctx} (the model entry's llama_cpp.n_ctx)"
            )
        self.context.kv_cache_clear()
        batch = self.context.params.n_batch
        head = list(prompt_ids[:-1])
        for start in range(0, len(head), batch):
            self._decode(head[start : start + batch], start)

    def _decode(self, tokens: list[int], position: int) -> None:
        """Tokens at positions position.., in sequence 0, the last one's logits kept."""
        self.batch.set_batch(tokens, n_past=position, logits_all=False)
        self.context.decode(self.batch)

    def _sample(self, request: Request, seed: int) -> Completion:
        """One sample from the prefilled prompt: up to max_tokens tokens, a stop id ending it."""
        prompt = request.prompt_ids
        self.context.kv_cache_seq_rm(0, len(prompt) - 1, -1)  # what the previous sample added
        self._decode([prompt[-1]], len(prompt) - 1)
        sampler = sampler_for(request.sampling, seed)
        ids: list[int] = []
        finish = "length"
        for step in range(request.sampling.max_tokens):
            token = sampler.sample(self.context, -1)  # it accepts the token into the chain as well
            if token in self.stop_ids:
                finish = "stop"
                break
            ids.append(token)
            if step + 1 < request.sampling.max_tokens:
                self._decode([token], len(prompt) + step)
        sampler.close()
        return Completion(tuple(ids), self.tokenizer.decode(ids), finish)


def load(path: Path, n_ctx: int, threads: int | None):
    """The model (weight repacking off: ``WEIGHT_REPACKING``) and one context of one sequence."""
    import llama_cpp
    from llama_cpp import _internals

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's load chatter
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = 0
    params.use_extra_bufts = False  # the AMX workaround (module docstring)
    model = _internals.LlamaModel(path_model=str(path), params=params, verbose=False)
    ctx = llama_cpp.llama_context_default_params()
    ctx.n_ctx = n_ctx
    ctx.n_batch = ctx.n_ubatch = min(512, n_ctx)
    ctx.n_seq_max = 1
    ctx.n_threads = ctx.n_threads_batch = threads or default_threads()
    ctx.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # fixed, not "auto" per machine
    ctx.no_perf = True
    return model, _internals.LlamaContext(model=model, params=ctx, verbose=False)


def stop_ids(model, tokenizer_eos: int | None) -> tuple[int, ...]:
    """The ids that end a sample: the GGUF's declared EOS (and end-of-turn, where it declares one)
    and the tokenizer's EOS, as the transformers backend's conversion of the same file stops (its
    generation_config's eos and the tokenizer's). Not llama.cpp's own end-of-generation set, which
    adds tokens it guesses from their text (SmolLM2's <|endoftext|>): the two backends then end a
    sample at the same ids."""
    declared = model.metadata()
    found = {model.token_eos(), tokenizer_eos}
    if "tokenizer.ggml.eot_token_id" in declared:
        found.add(int(declared["tokenizer.ggml.eot_token_id"]))
    return tuple(sorted(i for i in found if i is not None and i >= 0))


def default_threads() -> int:
    """Half the cores this process may run on, at least one (llama-cpp-python's own default):
    llama.cpp's threads spin while they wait on each other, so one on a busy core stalls the rest
    (on the shared 2-core machine at load averages of 3 to 5: 2 threads 5.2 tokens/s, 1 thread 47;
    benchmarks/bench_llama_cpp.py). The ids sampled do not depend on it (tests/test_llama_cpp_backend.py)."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // 2)


def precision_name(file_type: int) -> str:
    """A GGUF's ``general.file_type`` as the gguf package names it, less its "MOSTLY_" ("Q4_1",
    "Q4_K_M"): the dtype ``cotdyn init`` registers for the file and the backend records."""
    import gguf

    try:
        return gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"file_type {file_type}"


def gguf_precision(entry: dict) -> str | None:
    """The precision of the entry's GGUF file, read from its metadata without llama.cpp (cotdyn init
    runs where llama-cpp-python may not be installed); None if the file does not say."""
    import gguf

    field = gguf.GGUFReader(gguf_path(entry)).fields.get("general.file_type")
    return precision_name(int(field.parts[field.data[0]][0])) if field is not None else None


def file_type(model) -> str | None:
    """The loaded GGUF's precision (``precision_name`` of its ``general.file_type``)."""
    value = model.metadata().get("general.file_type")
    return precision_name(int(value)) if value is not None else None
