"""One POST to a time-stamping authority, bounded (issue 60): HTTP(S) only, one deadline for the
whole exchange, and one named line for each way it can fail.

``urllib`` bounds each read, not the exchange (a TSA that sends a byte every two seconds holds it
for ever), follows a redirect to any scheme, and turns a POST redirected by 302 into a GET (which
a TSA answers 405). Here the exchange runs in a worker thread that the caller waits for until the
deadline, then closes the connection under it; a redirect (301, 302, 303, 307, 308) to an http(s)
URL is followed by POSTing the same query again, at most ``MAX_REDIRECTS`` times, inside the same
deadline; to any other scheme it is refused.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.parse

SCHEMES = ("http", "https")
CONTENT_TYPE = "application/timestamp-query"
MAX_REDIRECTS = 3
REDIRECTS = (301, 302, 303, 307, 308)


def _checked(url: str, error) -> urllib.parse.SplitResult:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # a port that is not a number raises here, not in the connection  # noqa: B018
    except ValueError:
        raise error(f"{url}: not a URL") from None
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise error(f"{url}: not an http(s) URL")
    return parts


class _Exchange:
    """One request on one connection; ``close`` from another thread ends a read that waits."""

    def __init__(self, parts: urllib.parse.SplitResult, timeout: float):
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.connection = kind(parts.hostname, parts.port, timeout=timeout)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.socket = None  # kept: http.client hands it to the response, which still reads from it
        self.result: tuple[int, str | None, bytes] | None = None
        self.failure: BaseException | None = None

    def run(self, body: bytes, limit: int) -> None:
        try:
            self.connection.connect()
            self.socket = self.connection.sock
            self.connection.request(
                "POST", self.path, body, {"Content-Type": CONTENT_TYPE, "Accept": "application/timestamp-reply"}
            )
            answer = self.connection.getresponse()
            self.result = (answer.status, answer.getheader("Location"), answer.read(limit + 1))
        except BaseException as e:  # noqa: BLE001 (handed to the waiting thread, which names it)
            self.failure = e

    def close(self) -> None:
        try:
            if self.socket is not None:
                self.socket.shutdown(2)  # wakes a recv that waits in the worker
        except OSError:
            pass
        self.connection.close()


def _once(url: str, body: bytes, deadline: float, limit: int, error) -> tuple[int, str | None, bytes]:
    left = deadline - time.monotonic()
    if left <= 0:
        raise error(f"{url}: no answer within the deadline")
    exchange = _Exchange(_checked(url, error), left)
    worker = threading.Thread(target=exchange.run, args=(body, limit), daemon=True)
    worker.start()
    worker.join(left)
    # the socket's own timeout is the deadline's too
    stalled = worker.is_alive() or isinstance(exchange.failure, TimeoutError)
    exchange.close()
    if stalled:
        worker.join(5)
        raise error(f"{url}: no complete answer within the deadline (the TSA is too slow or stalled)")
    if exchange.failure is not None:
        e = exchange.failure
        reason = getattr(e, "strerror", None) or getattr(e, "reason", None) or type(e).__name__
        raise error(f"{url}: cannot reach the TSA ({reason})")
    return exchange.result


def post(url: str, body: bytes, timeout: float, limit: int, error) -> bytes:
    """The body a TSA at ``url`` answers to ``body`` with HTTP 200, at most ``limit`` bytes, within
    ``timeout`` seconds in all; ``error`` (an exception class) names each failure."""
    deadline = time.monotonic() + timeout
    for _ in range(MAX_REDIRECTS + 1):
        status, location, answer = _once(url, body, deadline, limit, error)
        if status in REDIRECTS:
            if not location:
                raise error(f"{url}: the TSA answered HTTP {status} (a redirect) without saying where")
            target = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(target).scheme not in SCHEMES:
                raise error(f"{url}: the TSA redirects (HTTP {status}) to a non-http(s) URL; refused")
            url = target
            continue
        if status != 200:
            raise error(f"{url}: the TSA answered HTTP {status} {http.client.responses.get(status, '')}".rstrip())
        if len(answer) > limit:
            raise error(f"{url}: the answer is over {limit} bytes, not a timestamp response")
        return answer
    raise error(f"{url}: more than {MAX_REDIRECTS} redirects")
