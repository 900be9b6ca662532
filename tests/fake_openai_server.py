"""A fake OpenAI-compatible completions server on 127.0.0.1, for the openai_compat backend's tests.

It speaks both dialects the backend knows (cotdyn.generation.backends.openai_compat.DIALECTS):
vLLM's ``POST /v1/completions`` (ids in each choice's ``token_ids``, the prompt echoed in
``prompt_token_ids``) and llama.cpp's ``POST /completion`` (ids in ``tokens``, ``stop_type``), and
``GET /v1/models``. What it generates is a seeded function of (prompt ids, seed) alone
(``generated_ids``), tokenized by a real tokenizer, so a test can say which ids a request must get
back and a rerun gets the same. It keeps every request body it received (``bodies``), refuses a
prompt that is not token ids or asks for n != 1, and can misbehave on purpose: fail the first
``fail_first`` completions with HTTP ``fail_status`` (503), answer without ids (``omit_ids``),
refuse a field (``rejects``) with HTTP 400 as a server that cannot honour it does, answer with a
body that is not JSON (``malformed``), go silent after ``hang_after`` completions (every request,
``GET /health`` included, is held open unanswered, as a SIGTERM'd llama-server does), or stop
listening after ``close_after`` completions (later connections are refused). Its llama.cpp answers
echo the seed used in ``generation_settings.seed``, as llama-server's do: the seed sent, or, with
``seed_bits``, only its low bits (llama-server's uint32_t seed). With ``ftype``, its /v1/models
entry names the weights' type in ``meta.ftype``, as llama-server's does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Sequence

SERVED = "fake-served-model"


def chain_text(prompt_ids: Sequence[int], seed: int) -> str:
    """A short worked answer, drawn from (prompt ids, seed): a few step lines and a final answer."""
    digest = hashlib.sha256(json.dumps([list(prompt_ids), seed]).encode()).digest()
    rng = random.Random(digest)
    total, lines = 0, []
    for step in range(rng.randint(2, 4)):
        term = rng.randint(1, 9)
        lines.append(f"Step {step + 1}: {total} + {term} = {total + term}.")
        total += term
    return "\n".join(lines) + f"\nThe answer is {total}."


@functools.cache
def _tokenizer(tokenizer_dir: Path):
    """Read once for every server of a session: the servers only encode with it, under their lock."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


class FakeServer:
    def __init__(
        self,
        tokenizer_dir: Path,
        fail_first: int = 0,
        omit_ids: bool = False,
        rejects=(),
        fail_status: int = 503,
        malformed: bool = False,
        hang_after: int | None = None,
        close_after: int | None = None,
        seed_bits: int | None = None,
        ftype: str | None = None,
    ):
        self.tokenizer = _tokenizer(tokenizer_dir)
        self.fail_first, self.omit_ids, self.rejects = fail_first, omit_ids, set(rejects)
        self.fail_status, self.malformed, self.seed_bits = fail_status, malformed, seed_bits
        self.hang_after, self.close_after = hang_after, close_after
        self.listed = {"id": SERVED, "object": "model", "created": 1} | ({"meta": {"ftype": ftype}} if ftype else {})
        self.answered = 0
        self.released = threading.Event()  # set on exit: requests held by ``hang_after`` end
        self.bodies: list[tuple[str, dict]] = []  # (path, body) of every completion request received
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"

    def generated_ids(self, prompt_ids: Sequence[int], seed: int, max_tokens: int) -> tuple[list[int], bool]:
        """(the ids a request gets, whether it stopped at EOS) -- EOS included, as vLLM returns it."""
        with self._lock:  # one tokenizer shared by the handler threads
            ids = self.tokenizer.encode(chain_text(prompt_ids, seed), add_special_tokens=False)
        ids = ids + [self.tokenizer.eos_token_id]
        return (ids[:max_tokens], False) if len(ids) > max_tokens else (ids, True)

    def __enter__(self) -> FakeServer:
        # shutdown() waits for the next poll: 0.5 s by default, per test
        threading.Thread(target=self._http.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.released.set()
        self._http.shutdown()
        self._http.server_close()

    def silent(self) -> bool:
        """Whether it has gone silent (``hang_after`` completions answered)."""
        with self._lock:
            return self.hang_after is not None and self.answered >= self.hang_after

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        """(HTTP status, JSON) of one completion request."""
        with self._lock:
            self.bodies.append((path, body))
            failing = self.fail_first > 0
            self.fail_first -= failing
        if failing:
            return self.fail_status, {"error": "the fake server is failing on purpose"}
        refused = sorted(self.rejects & set(body))
        if refused:
            return 400, {"error": f"unsupported field: {refused[0]}"}
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(i, int) for i in prompt) or body.get("n", 1) != 1:
            return 400, {"error": "prompt must be token ids, n must be 1"}
        vllm = path == "/v1/completions"
        ids, stopped = self.generated_ids(prompt, body["seed"], body["max_tokens" if vllm else "n_predict"])
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if vllm:
            choice = {"index": 0, "text": text, "finish_reason": "stop" if stopped else "length"}
            if not self.omit_ids:
                choice |= {"token_ids": ids, "prompt_token_ids": prompt}
            return 200, {"id": "cmpl-fake", "object": "text_completion", "model": body["model"], "choices": [choice]}
        used = body["seed"] % (1 << self.seed_bits) if self.seed_bits else body["seed"]
        settings = {"seed": used, "temperature": body["temperature"], "n_predict": body["n_predict"]}
        answer = {"content": text, "stop_type": "eos" if stopped else "limit", "model": body["model"]}
        answer["generation_settings"] = settings
        return 200, answer if self.omit_ids else answer | {"tokens": ids}

    def count_answer(self, status: int) -> None:
        """One completion answered; at ``close_after`` the server stops listening (later connections
        are refused; the connection answering this one stays open)."""
        with self._lock:
            self.answered += status == 200
            closing = self.close_after is not None and self.answered == self.close_after
        if closing:
            self._http.socket.close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, payload: dict) -> None:
                self._send_raw(status, json.dumps(payload).encode())

            def _send_raw(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if server.silent():
                    server.released.wait()
                    return
                if self.path == "/health":
                    self._send(200, {"status": "ok"})
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [server.listed]})
                else:
                    self._send(404, {"error": f"no {self.path}"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.silent():
                    server.released.wait()
                    return
                if self.path in ("/v1/completions", "/completion"):
                    status, payload = server.answer(self.path, body)
                    # counted (and the server closed, at close_after) before the answer goes: a client
                    # that hears it cannot connect again before the close
                    server.count_answer(status)
                    if server.malformed and status == 200:
                        self._send_raw(status, b'{"choices": [{"text": "cut off')
                    else:
                        self._send(status, payload)
                else:
                    self._send(404, {"error": f"no {self.path}"})

            def log_message(self, *args):  # quiet: pytest shows failures, not every request
                pass

        return Handler
