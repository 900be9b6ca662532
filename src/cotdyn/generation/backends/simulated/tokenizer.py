"""One token per UTF-8 byte, plus BOS and EOS: the simulated model's tokenizer."""

from __future__ import annotations

from typing import Sequence

BOS, EOS = 256, 257


class ByteTokenizer:
    """One token per UTF-8 byte, plus BOS and EOS; a plain-text chat template."""

    bos_token_id, eos_token_id = BOS, EOS
    chat_template = "<|system|>\n{system}\n<|user|>\n{question}\n<|assistant|>\n"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def chat_prompt_ids(self, system_prompt: str, question: str) -> list[int]:
        return [BOS] + self.encode(self.chat_template.format(system=system_prompt, question=question))
