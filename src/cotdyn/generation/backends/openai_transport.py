"""How the openai_compat backend talks to a server: JSON over HTTP, retries, and requests in flight
watched for a server that stopped answering.

Every way a server can fail (a refused connection, HTTP 4xx/5xx, a body that is not a JSON object,
a connection dropped mid-answer, a server gone silent) ends in one ``ServerError`` whose message
names the server and what it said; the generation scripts print that one line and exit
(``cotdyn.generation.failures``).

A SIGTERM'd llama-server keeps its connections open and answers nothing, so a request would wait
its whole ``timeout_s`` (600 s by default) and then be retried. While requests are in flight and
none has come back for ``PROBE_EVERY_S``, the server's ``GET /health`` is asked, with its own short
limit: any HTTP answer (a 404 from a server without the route included) means it is there; no
answer within ``PROBE_TIMEOUT_S`` ends the call with a ``ServerError``. The requests run in daemon
threads, so a job that stops does not wait for the ones still hanging.
"""

from __future__ import annotations

import http.client
import json
import queue
import threading
import time
import urllib.error
import urllib.request
from typing import Callable, Iterable

from cotdyn.generation.backends.base import BackendFailure

RETRIED = (429, 500, 502, 503, 504)
PROBE_EVERY_S = 30.0  # silence (no request back) before the server is asked whether it is there
PROBE_TIMEOUT_S = 15.0  # a server that does not answer GET /health within this is gone


class ServerError(BackendFailure):
    """What the server said, or that it said nothing usable; names the server and the request."""


def post_json(
    url: str,
    body: dict | None,
    timeout: float,
    retries: int,
    backoff_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """POST (or GET, without a body) JSON to ``url`` and read back a JSON object; a refused
    connection, a dropped one, a timeout, 429 or 5xx is retried with exponential backoff; any other
    HTTP error, or an answer that is not a JSON object, is raised with what the server sent."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            message = e.read().decode(errors="replace")[:500]
            if e.code not in RETRIED:
                raise ServerError(f"{url}: HTTP {e.code}: {message}") from None
            failure = f"HTTP {e.code}: {message}"
        except (OSError, http.client.HTTPException) as e:  # refused, reset, timed out, cut mid-answer
            failure = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
        else:
            return json_object(url, raw)
        if attempt < retries:
            sleep(backoff_s * 2**attempt)
    raise ServerError(f"{url}: no answer after {retries + 1} tries (last: {failure})")


def json_object(url: str, raw: bytes) -> dict:
    """The answer's JSON object, or a ServerError quoting its start."""
    try:
        answer = json.loads(raw)
    except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
        raise ServerError(f"{url}: the answer is not JSON ({e}): {raw[:200]!r}") from None
    if not isinstance(answer, dict):
        raise ServerError(f"{url}: the answer is JSON but not an object: {raw[:200]!r}")
    return answer


def server_answers(base_url: str, timeout: float) -> str | None:
    """None if the server answers ``GET /health`` at all (any HTTP status), else why not."""
    try:
        with urllib.request.urlopen(base_url + "/health", timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except (OSError, http.client.HTTPException) as e:
        return f"{type(e).__name__}: {getattr(e, 'reason', e)}"


def run_watched(work: Iterable, one: Callable, workers: int, base_url: str, on_result: Callable) -> None:
    """Run ``one(item)`` over ``work``, ``workers`` at a time, in daemon threads; ``on_result(item,
    value)`` hears each result in the caller's thread as it comes. The first failure stops new work;
    the items in flight are waited for (and told), then the failure is raised. A server silent for
    ``PROBE_EVERY_S`` that does not answer its health probe ends the call at once."""
    pending = list(work)[::-1]
    results: queue.Queue = queue.Queue()
    lock, stop = threading.Lock(), threading.Event()
    started = 0

    def worker() -> None:
        nonlocal started
        while not stop.is_set():
            with lock:
                if not pending:
                    return
                item = pending.pop()
                started += 1
            try:
                results.put((item, one(item), None))
            except Exception as e:  # noqa: BLE001 - handed to the caller's thread, raised there
                results.put((item, None, e))

    for _ in range(min(workers, len(pending))):
        threading.Thread(target=worker, daemon=True).start()
    finished, failure = 0, None
    while True:
        with lock:
            if finished == started and (not pending or stop.is_set()):
                break
        try:
            item, value, error = results.get(timeout=PROBE_EVERY_S)
        except queue.Empty:
            gone = server_answers(base_url, PROBE_TIMEOUT_S)
            if gone is not None:
                stop.set()
                raise ServerError(
                    f"{base_url}: the server stopped answering ({started - finished} requests in flight, none back "
                    f"in {PROBE_EVERY_S:g} s; GET /health: {gone})"
                ) from failure
            continue
        finished += 1
        if error is not None:
            failure = failure or error
            stop.set()
        else:
            on_result(item, value)
    if failure is not None:
        raise failure
