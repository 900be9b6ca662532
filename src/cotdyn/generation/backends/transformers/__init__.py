"""The transformers backend: CPU or GPU, small models, and the embedded default (docs/reference.md section 8).

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

The package: ``sampler`` (``SeededSampler`` and its inverse-CDF draw), ``weights`` (a packaged GGUF
model converted once, the random stand-in Llama), ``backend`` (``TransformersBackend``: shared
prefill, compacting decode). Every public name is importable from here.
"""

from cotdyn.generation.backends.transformers.backend import DECODERS, DTYPES, TransformersBackend, prefix_roots
from cotdyn.generation.backends.transformers.sampler import CDF_BLOCK, SeededSampler, inverse_cdf
from cotdyn.generation.backends.transformers.weights import convert_gguf, locate_gguf, random_llama

__all__ = [
    "CDF_BLOCK",
    "DECODERS",
    "DTYPES",
    "SeededSampler",
    "TransformersBackend",
    "convert_gguf",
    "inverse_cdf",
    "locate_gguf",
    "prefix_roots",
    "random_llama",
]
