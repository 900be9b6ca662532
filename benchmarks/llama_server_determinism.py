"""The cost of the openai_compat backend's deterministic defaults on llama.cpp's llama-server, against
the settings a throughput-minded lab would pick, in the same run, on the embedded SmolLM2 GGUF.

    python benchmarks/llama_server_determinism.py [--server PATH] [--requests 8] [--samples 4] [--threads 2]

- deterministic (the defaults): one request in flight, ``cache_prompt: false``, llama-server --parallel 1
- throughput: 4 requests in flight, ``cache_prompt: true``, llama-server --parallel 4

Each setting draws the same requests twice, the second time in reverse order, and prints generated
tokens/s and how many samples the second pass drew equal to the first (a resumed or regenerated
study needs all of them equal). llama-server comes from COTDYN_LLAMA_SERVER, PATH, or
scripts/llama_server.sh's cache. Speed is measured here, never in tests (docs/reference.md section 10).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_llama_server import GGUF, NO_REPACK, SERVED, free_port, llama_server  # noqa: E402


def start(binary: str, gguf: Path, slots: int, threads: int, log: Path) -> tuple[subprocess.Popen, str]:
    """llama-server with ``slots`` parallel slots on a free port, once its /health says it is up."""
    port = free_port()
    command = [binary, "-m", str(gguf), "--alias", SERVED, "--host", "127.0.0.1", "--port", str(port),
               "--parallel", str(slots), "--ctx-size", str(1024 * slots), "--threads", str(threads), "--no-webui", *NO_REPACK]  # fmt: skip
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return process, url
        except OSError:
            pass
        if process.poll() is not None:
            raise SystemExit(f"llama-server exited: {log.read_text()[-1000:]}")
        time.sleep(0.5)
    process.kill()
    raise SystemExit("llama-server not up in 120 s")


def draw(backend, requests) -> tuple[dict, float]:
    began = time.perf_counter()
    out = backend.generate(requests)
    seconds = time.perf_counter() - began
    return {(r.prompt_ids, r.seed): [c.token_ids for c in samples] for r, samples in zip(requests, out)}, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None, help="llama-server's path (default: found as the test finds it)")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4, help="samples per request (each its own HTTP request)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    binary = args.server or llama_server()
    if binary is None:
        raise SystemExit("no llama-server: run scripts/llama_server.sh or pass --server")
    from transformers import AutoTokenizer

    from cotdyn.generation.backends import Request, Sampling, openai_compat
    from cotdyn.generation.backends.openai_compat import OpenAICompatBackend
    from cotdyn.generation.backends.transformers import locate_gguf

    gguf = locate_gguf(*GGUF)
    work = Path(tempfile.mkdtemp(prefix="cotdyn-llama-bench-"))
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(work / "tokenizer")
    llama = openai_compat.DIALECTS["llama.cpp"]
    settings = {  # name -> (slots, requests in flight, cache_prompt)
        "deterministic (defaults)": (1, 1, False),
        "throughput": (4, 4, True),
    }
    print(f"llama-server {binary}; {args.requests} requests x {args.samples} samples, <= {args.max_tokens} tokens, "
          f"{args.threads} threads; machine: {os.cpu_count()} cores (shared)")  # fmt: skip
    for name, (slots, inflight, cache_prompt) in settings.items():
        openai_compat.DIALECTS["llama.cpp"] = dataclasses.replace(
            llama, off={**llama.off, "cache_prompt": cache_prompt}
        )
        process, url = start(binary, gguf, slots, args.threads, work / f"server-{slots}.log")
        try:
            options = {"base_url": url, "model": SERVED, "server": "llama.cpp", "concurrency": inflight,
                       "retries": 0, "backoff_s": 0.0, "timeout_s": 600.0}  # fmt: skip
            backend = OpenAICompatBackend(str(work / "tokenizer"), "bench", options)
            sampling = Sampling(temperature=0.7, max_tokens=args.max_tokens, top_p=0.95)
            requests = [
                Request(tuple(backend.tokenizer.chat_prompt_ids("Think step by step.", f"What is {a} + {a + 3}?")),
                        args.samples, sampling, seed=1000 * a)
                for a in range(1, args.requests + 1)
            ]  # fmt: skip
            first, seconds = draw(backend, requests)
            again, _ = draw(backend, requests[::-1])
        finally:
            process.terminate()
            process.wait(timeout=30)
        tokens = sum(len(ids) for samples in first.values() for ids in samples)
        equal = sum(a == b for key in first for a, b in zip(first[key], again[key]))
        total = sum(len(s) for s in first.values())
        print(f"{name:26s} slots {slots}, in flight {inflight}, cache_prompt {str(cache_prompt).lower():5s}: "
              f"{tokens / seconds:7.1f} tokens/s ({tokens} tokens in {seconds:.1f} s); "
              f"second pass, reversed: {equal} of {total} samples equal")  # fmt: skip
    openai_compat.DIALECTS["llama.cpp"] = llama


if __name__ == "__main__":
    main()
