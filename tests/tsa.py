"""A throwaway RFC 3161 time-stamping authority on 127.0.0.1, for cotdyn.plan.timestamp's tests.

``make_authority(directory, name)`` makes a CA and a TSA key and certificate under it (the TSA's
extendedKeyUsage is timeStamping, critical, as RFC 3161 section 2.3 requires) with the ``openssl``
command, and writes the ``[tsa_config1]`` section ``openssl ts -reply`` reads. ``Authority.reply``
answers a DER TimeStampReq with a DER TimeStampResp; ``Authority.token`` makes a token offline for a
sha256 (what ``cotdyn register --timestamp-token FILE`` is handed). ``TsaServer`` serves an authority
over HTTP, as a public TSA does (POST, ``application/timestamp-query``), and can misbehave on
purpose at other paths: ``/500`` (an HTTP error), ``/garbage`` (200 with bytes that are no response),
``/big`` (200 with more than the client reads), ``/nocert`` (a token without the TSA's certificate), ``/other`` (a token over another digest),
``/stale/<sha256>`` (a token over that digest made for another request: another nonce), ``/moved``
(302 to ``/tsr``), ``/to-ftp`` (302 to an ftp: URL) and ``/trickle`` (200, then a byte every 0.3 s).

The token's genTime is the clock's: ``openssl ts -reply`` has no option to set it, and faketime is
not installed, so a token from the future or the past cannot be made here; a test of a time
comparison builds the parsed Token (a frozen dataclass) with the time it needs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CONFIG = """\
[ tsa ]
default_tsa = tsa_config1

[ tsa_config1 ]
dir = {dir}
serial = $dir/tsaserial
crypto_device = builtin
signer_cert = $dir/tsa.crt
# The chain sent with a token when the request asks for certificates: the TSA's certificate is
# always sent; the CA's is left out, as a public TSA does, so the reviewer's CA file is what anchors it.
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.3.6.1.4.1.99999.1
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = no
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256

[ tsa_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = critical, timeStamping
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid

[ ca_ext ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
"""


def openssl(*args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(["openssl", *args], input=data, capture_output=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {done.stderr.decode(errors='replace')}")
    return done.stdout


@dataclass
class Authority:
    directory: Path
    name: str
    # openssl ts -reply rewrites the serial file: one reply at a time per authority
    _lock: threading.Lock

    @property
    def ca_pem(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def tsa_pem(self) -> Path:
        return self.directory / "tsa.crt"

    @property
    def config(self) -> Path:
        return self.directory / "openssl.cnf"

    def reply(self, query: bytes) -> bytes:
        """The DER TimeStampResp ``openssl ts -reply`` gives for a DER TimeStampReq."""
        with self._lock, tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "q.tsq").write_bytes(query)
            openssl(
                "ts", "-reply", "-config", str(self.config), "-section", "tsa_config1",
                "-queryfile", str(Path(tmp) / "q.tsq"), "-out", str(Path(tmp) / "r.tsr"),
            )  # fmt: skip
            return (Path(tmp) / "r.tsr").read_bytes()

    def query(self, sha256_hex: str) -> bytes:
        """``openssl ts -query`` over a digest, with a nonce and certReq (what the docs tell a user to run)."""
        return openssl("ts", "-query", "-digest", sha256_hex, "-sha256", "-cert")

    def token(self, sha256_hex: str) -> bytes:
        """A token over ``sha256_hex`` made offline: a query, then this authority's reply."""
        return self.reply(self.query(sha256_hex))

    def openssl_verify(self, token_path: Path, data_path: Path) -> subprocess.CompletedProcess:
        """``openssl ts -verify`` of a .tsr against the data and this authority's CA (the cross-check)."""
        return subprocess.run(
            ["openssl", "ts", "-verify", "-in", str(token_path), "-data", str(data_path), "-CAfile", str(self.ca_pem)],
            capture_output=True,
            text=True,
            timeout=60,
        )


def make_authority(
    directory: Path,
    name: str = "cotdyn test",
    self_signed: bool = False,
    *,
    rsa: bool = False,
    ess_v1: bool = False,
    intermediate: bool = False,
    chain: bool = False,
) -> Authority:
    """A CA (``ca.crt``) and a TSA key and certificate it signs, in ``directory``, with openssl's
    config for ``openssl ts -reply``. P-256 keys: made in milliseconds, unlike RSA's.

    ``self_signed``: the TSA's certificate signs itself (timeStamping, critical) and is its own
    ``ca.crt``: the forger's token, which must not verify against a CA the reviewer gives.
    What real authorities vary, each as openssl's own TSA configuration does it: ``rsa`` (RSA-2048
    keys), ``ess_v1`` (ESSCertID v1, a SHA-1 certificate hash, as older TSAs sign), ``intermediate``
    (the TSA's certificate issued by an intermediate CA under the root), ``chain`` (``certs =``: the
    TSA sends its chain, root included, in the file's order, which is not DER's)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "openssl.cnf"
    text = CONFIG.format(dir=directory)
    if ess_v1:
        text = text.replace("ess_cert_id_alg = sha256", "ess_cert_id_alg = sha1")
    if chain:
        text = text.replace("signer_key =", "certs = $dir/chain.pem\nsigner_key =")
    config.write_text(text)
    (directory / "tsaserial").write_text("01\n")
    d = str(directory)
    ec = (
        ("-newkey", "rsa:2048", "-nodes") if rsa else ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    )
    openssl(
        "req", "-x509", *ec, "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt", "-days", "3650",
        "-subj", f"/O={name}/CN={name} CA", "-config", str(config), "-extensions", "ca_ext",
    )  # fmt: skip
    if self_signed:
        openssl(
            "req", "-x509", *ec, "-keyout", f"{d}/tsa.key", "-out", f"{d}/tsa.crt", "-days", "3650",
            "-subj", f"/O={name}/CN={name} TSA", "-config", str(config), "-extensions", "tsa_ext",
        )  # fmt: skip
        (directory / "ca.crt").write_bytes((directory / "tsa.crt").read_bytes())
        return Authority(directory, name, threading.Lock())
    issuer = "ca"
    if intermediate:
        openssl(
            "req",
            "-new",
            *ec,
            "-keyout",
            f"{d}/mid.key",
            "-out",
            f"{d}/mid.csr",
            "-subj",
            f"/O={name}/CN={name} intermediate",
        )
        openssl(
            "x509", "-req", "-in", f"{d}/mid.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key", "-set_serial", "3",
            "-days", "3650", "-out", f"{d}/mid.crt", "-extfile", str(config), "-extensions", "ca_ext",
        )  # fmt: skip
        issuer = "mid"
    openssl("req", "-new", *ec, "-keyout", f"{d}/tsa.key", "-out", f"{d}/tsa.csr", "-subj", f"/O={name}/CN={name} TSA")
    openssl(
        "x509", "-req", "-in", f"{d}/tsa.csr", "-CA", f"{d}/{issuer}.crt", "-CAkey", f"{d}/{issuer}.key",
        "-set_serial", "2", "-days", "3650", "-out", f"{d}/tsa.crt", "-extfile", str(config), "-extensions", "tsa_ext",
    )  # fmt: skip
    # the chain as a TSA's operator writes it, root first: not the order DER gives a SET
    parts = ["ca.crt", *(["mid.crt"] if intermediate else []), "tsa.crt"]
    (directory / "chain.pem").write_bytes(b"".join((directory / p).read_bytes() for p in parts))
    return Authority(directory, name, threading.Lock())


class TsaServer:
    """An authority served over HTTP on 127.0.0.1 (an ephemeral port, a daemon thread); a context manager."""

    def __init__(self, authority: Authority):
        self.authority = authority
        self.requests: list[str] = []  # the path of every POST received
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> TsaServer:
        # shutdown() waits for the next poll: 0.5 s by default
        threading.Thread(target=self._http.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()

    def answer(self, path: str, query: bytes) -> tuple[int, bytes]:
        self.requests.append(path)
        if path == "/500":
            return 500, b"the test TSA fails on purpose"
        if path == "/garbage":
            return 200, b"this is not a TimeStampResp"
        if path == "/big":
            return 200, b"\0" * (2 << 20)
        if path == "/other":
            return 200, self.authority.token(hashlib.sha256(b"another plan").hexdigest())
        if path == "/nocert" and query.endswith(b"\x01\x01\xff"):
            # the request's certReq (its last field, BOOLEAN TRUE) read as FALSE: the same request,
            # nonce included, answered without the certificate a TSA that ignores certReq leaves out
            return 200, self.authority.reply(query[:-3] + b"\x01\x01\x00")
        if path.startswith("/stale/"):
            # a valid token over the digest the path names, made for another request: another nonce
            return 200, self.authority.token(path.removeprefix("/stale/"))
        return 200, self.authority.reply(query)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                query = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append(self.path)
                if self.path in ("/moved", "/to-ftp"):
                    self.send_response(302)
                    self.send_header("Location", "/tsr" if self.path == "/moved" else "ftp://127.0.0.1/tsr")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/trickle":  # a TSA that never finishes: each read gets a byte in time
                    body = server.authority.reply(query)
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for i in range(min(len(body), 40)):
                        time.sleep(0.3)
                        try:
                            self.wfile.write(body[i : i + 1])
                            self.wfile.flush()
                        except (BrokenPipeError, ConnectionResetError):
                            return
                    return
                server.requests.pop()
                status, body = server.answer(self.path, query)
                self.send_response(status)
                self.send_header("Content-Type", "application/timestamp-reply")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # /big: the client stops reading at its bound and hangs up, as it should

            def log_message(self, *args):  # keep pytest's output clean
                pass

        return Handler


def free_port() -> int:
    """A port nothing listens on (bound, then closed): a TSA that is down answers connection refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":  # a manual check: make an authority and print a token's text
    with tempfile.TemporaryDirectory() as tmp:
        a = make_authority(Path(tmp))
        token = a.token(hashlib.sha256(b"plan").hexdigest())
        print(openssl("ts", "-reply", "-in", "/dev/stdin", "-text", data=token).decode())
        print(os.listdir(tmp))
