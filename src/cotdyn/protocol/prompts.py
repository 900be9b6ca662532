"""Prompts as token ids (docs/reference.md section 4: prefixes are token-exact).

The registered system prompt and the question go through the model's chat template once; a
prefix is those ids followed by the reference chain's own generated ids up to a boundary. No
text is re-joined or re-tokenized, and no second BOS is added.
"""

from __future__ import annotations

import hashlib
from typing import Sequence


class ChatTokenizer:
    """A Hugging Face tokenizer seen through the two operations the protocol needs."""

    def __init__(self, hf_tokenizer):
        if not getattr(hf_tokenizer, "chat_template", None):
            raise ValueError(f"tokenizer {hf_tokenizer.name_or_path!r} has no chat template")
        self.hf = hf_tokenizer
        self.eos_token_id = hf_tokenizer.eos_token_id
        self.bos_token_id = hf_tokenizer.bos_token_id

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def chat_prompt_ids(self, system_prompt: str, question: str) -> list[int]:
        messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]
        encoded = self.hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)
        return drop_double_bos(ids, self.bos_token_id)

    def template_sha256(self) -> str:
        return hashlib.sha256(self.hf.chat_template.encode()).hexdigest()

    def vocab_sha256(self) -> str:
        return tokenizer_sha256(self.hf)


def tokenizer_sha256(hf_tokenizer) -> str:
    """The sha256 of a tokenizer's vocabulary, as a backend's description records it."""
    return hashlib.sha256(repr(sorted(hf_tokenizer.get_vocab().items())).encode()).hexdigest()


def drop_double_bos(ids: list[int], bos_token_id: int | None) -> list[int]:
    """Templates that write BOS themselves plus a tokenizer that adds one give two; keep one."""
    if bos_token_id is not None and len(ids) >= 2 and ids[0] == ids[1] == bos_token_id:
        return ids[1:]
    return ids


def prefix_ids(prompt_ids: Sequence[int], chain_ids: Sequence[int], n_tokens: int) -> tuple[int, ...]:
    """The prompt for prefix k: template ids + the chain's first ``n_tokens`` generated ids."""
    if not 0 <= n_tokens <= len(chain_ids):
        raise ValueError(f"prefix of {n_tokens} tokens outside a chain of {len(chain_ids)}")
    return tuple(prompt_ids) + tuple(chain_ids[:n_tokens])
