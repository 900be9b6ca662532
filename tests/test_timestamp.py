"""cotdyn.plan.timestamp against a throwaway TSA (tests/tsa.py): openssl signs, 127.0.0.1 serves.

Everything is offline. ``openssl ts -verify`` cross-checks what the module accepts and refuses.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import threading
from pathlib import Path

import pytest
from tsa import TsaServer, free_port, make_authority, openssl

from cotdyn.plan.timestamp import (
    MAX_TOKEN_BYTES,
    TimestampError,
    fetch_token,
    parse_token,
    read_token,
    timestamp_request,
    verify_token,
)

PLAN = b"hypotheses:\n  - id: H1\n    statement: entropy falls before the answer\n"
PLAN_SHA = hashlib.sha256(PLAN).hexdigest()


@pytest.fixture(scope="module")
def authorities(tmp_path_factory):
    """The reviewer's TSA, an unrelated one, and a forger's (self-signed TSA certificate)."""
    root = tmp_path_factory.mktemp("tsa")
    return (
        make_authority(root / "trusted", "cotdyn test"),
        make_authority(root / "other", "unrelated"),
        make_authority(root / "forger", "forger", self_signed=True),
    )


@pytest.fixture(scope="module")
def tsa(authorities):
    with TsaServer(authorities[0]) as server:
        yield server


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_bytes(PLAN)
    return path


def refused(fn, *args, match: str) -> str:
    with pytest.raises(TimestampError, match=match) as e:
        fn(*args)
    return str(e.value)


# --- the round trip -----------------------------------------------------------------------


def test_a_token_fetched_over_http_verifies_against_the_ca(tsa, authorities):
    before = datetime.datetime.now(datetime.timezone.utc)
    body = fetch_token(f"{tsa.url}/tsr", PLAN, timeout=10)
    after = datetime.datetime.now(datetime.timezone.utc)
    token = verify_token(body, PLAN_SHA, authorities[0].ca_pem)
    assert token.imprint_sha256 == PLAN_SHA
    assert token.sha256 == hashlib.sha256(body).hexdigest()
    assert token.tsa_subject == "CN=cotdyn test TSA,O=cotdyn test"
    assert token.gen_time.tzinfo == datetime.timezone.utc
    # genTime has whole seconds (accuracy 1 s): the second the TSA signed in
    assert before.replace(microsecond=0) - datetime.timedelta(seconds=1) <= token.gen_time <= after
    assert isinstance(token.serial, int) and token.serial > 0
    assert "/tsr" in tsa.requests
    # an upper-case hex digest names the same registration
    assert verify_token(body, PLAN_SHA.upper(), authorities[0].ca_pem) == token


def test_openssl_verifies_the_same_token(tsa, authorities, plan_file, tmp_path):
    """openssl ts -verify agrees: the token the module accepts, over the plan file, from the CA."""
    tsr = tmp_path / "plan.tsr"
    tsr.write_bytes(fetch_token(f"{tsa.url}/tsr", PLAN))
    done = authorities[0].openssl_verify(tsr, plan_file)
    assert done.returncode == 0 and "Verification: OK" in done.stdout, done.stdout + done.stderr
    assert read_token(tsr) == verify_token(tsr.read_bytes(), PLAN_SHA, authorities[0].ca_pem)
    # and both refuse it against the unrelated CA
    done = authorities[1].openssl_verify(tsr, plan_file)
    assert done.returncode != 0 and "Verification: FAILED" in done.stdout
    refused(verify_token, tsr.read_bytes(), PLAN_SHA, authorities[1].ca_pem, match="does not verify against")


def test_the_request_is_the_one_openssl_makes(authorities, plan_file, tmp_path):
    """timestamp_request's query reads, in openssl, as `openssl ts -query -data plan -sha256 -cert`'s:
    the plan's sha256, a nonce, certificates required; and a token made offline from openssl's own
    query (what the docs tell a user to run) verifies in the module."""
    query = tmp_path / "plan.tsq"
    query.write_bytes(timestamp_request(PLAN))
    text = openssl("ts", "-query", "-in", str(query), "-text").decode()
    theirs = openssl("ts", "-query", "-data", str(plan_file), "-sha256", "-cert", "-text").decode()
    for line in ("Hash Algorithm: sha256", "Certificate required: yes"):
        assert line in text and line in theirs
    digest = lambda t: t.split("Message data:")[1].split("Policy OID")[0]  # noqa: E731
    assert digest(text) == digest(theirs)
    assert "Nonce: 0x" in text
    assert timestamp_request(PLAN) != timestamp_request(PLAN)  # a fresh nonce each time
    offline = authorities[0].reply(openssl("ts", "-query", "-data", str(plan_file), "-sha256", "-cert"))
    assert verify_token(offline, PLAN_SHA, authorities[0].ca_pem).imprint_sha256 == PLAN_SHA


# --- verify_token's refusals ---------------------------------------------------------------


def test_a_token_over_another_sha256_is_refused(authorities):
    other = hashlib.sha256(b"the plan before an edit").hexdigest()
    token = authorities[0].token(other)
    message = refused(verify_token, token, PLAN_SHA, authorities[0].ca_pem, match="the token is over")
    assert f"the token is over {other}, the registration is {PLAN_SHA}" in message


def test_a_token_from_a_ca_the_reviewer_did_not_give_is_refused(authorities):
    trusted, other, forger = authorities
    token = other.token(PLAN_SHA)
    assert verify_token(token, PLAN_SHA, other.ca_pem).tsa_subject == "CN=unrelated TSA,O=unrelated"
    refused(verify_token, token, PLAN_SHA, trusted.ca_pem, match=f"does not verify against .*{trusted.ca_pem.name}")


def test_a_self_signed_tsa_certificate_does_not_vouch_for_itself(authorities):
    """The forger's token embeds a self-signed certificate with the timeStamping key usage: were it
    trusted as the TSA certificate (VerifierBuilder.tsa_certificate), it would verify against any CA."""
    trusted, _, forger = authorities
    token = forger.token(PLAN_SHA)
    refused(verify_token, token, PLAN_SHA, trusted.ca_pem, match="does not verify against")


def test_a_ca_file_that_is_no_certificate_is_refused(authorities, tmp_path):
    token = authorities[0].token(PLAN_SHA)
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n")
    refused(verify_token, token, PLAN_SHA, not_pem, match="no certificate \\(PEM or DER\\)")
    # the same CA certificate as DER (as some TSAs publish it) is read too
    der = tmp_path / "ca.der"
    der.write_bytes(openssl("x509", "-in", str(authorities[0].ca_pem), "-outform", "DER"))
    assert verify_token(token, PLAN_SHA, der).imprint_sha256 == PLAN_SHA
    refused(verify_token, token, PLAN_SHA, tmp_path / "missing.pem", match="cannot read the CA certificate file")
    refused(verify_token, token, "not-a-hash", authorities[0].ca_pem, match="is not a sha256")


def test_a_token_without_certificates_names_the_tsa_but_does_not_verify(authorities):
    """A query without -cert: the token carries no certificate, so the CA alone cannot check it;
    the TSA name field still names the TSA."""
    trusted = authorities[0]
    token = trusted.reply(openssl("ts", "-query", "-digest", PLAN_SHA, "-sha256"))
    assert parse_token(token, "plan.tsr").tsa_subject == "CN=cotdyn test TSA,O=cotdyn test"
    refused(verify_token, token, PLAN_SHA, trusted.ca_pem, match="does not verify against")


def test_a_rejection_is_not_a_token(authorities):
    # the test TSA accepts sha256, sha384 and sha512 imprints: a sha1 query is rejected (badAlg)
    rejection = authorities[0].reply(openssl("ts", "-query", "-digest", "00" * 20, "-sha1"))
    refused(parse_token, rejection, "plan.tsr", match=r"plan.tsr: the TSA did not grant the token \(status rejection")
    # a granted token over a sha512 cannot be over the registration's sha256
    sha512 = authorities[0].reply(openssl("ts", "-query", "-digest", "ab" * 64, "-sha512", "-cert"))
    refused(parse_token, sha512, "plan.tsr", match=r"the token's imprint is not a sha256 \(2.16.840.1.101.3.4.2.3\)")


def test_a_damaged_token_is_refused_by_name_or_reads_as_the_original(authorities):
    """Bytes changed at random (seeded), or the file cut short: verify_token refuses with a
    TimestampError (a damaged certificate once raised cryptography's InvalidVersion, and an unknown
    TSA name form a KeyError), or accepts a change outside the signed fields (CMS leaves the signature
    algorithm identifiers unsigned) and then reads the same imprint, time and TSA."""
    import random

    trusted = authorities[0]
    original = trusted.token(PLAN_SHA)
    expected = verify_token(original, PLAN_SHA, trusted.ca_pem)
    rng = random.Random(48)
    outcomes = {"refused": 0, "accepted": 0}
    for _ in range(1500):
        damaged = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        if rng.random() < 0.2:
            damaged = damaged[: rng.randrange(len(damaged))]
        try:
            token = verify_token(bytes(damaged), PLAN_SHA, trusted.ca_pem)
        except TimestampError:
            outcomes["refused"] += 1
            continue
        outcomes["accepted"] += 1
        assert (token.imprint_sha256, token.gen_time, token.tsa_subject, token.serial) == (
            expected.imprint_sha256,
            expected.gen_time,
            expected.tsa_subject,
            expected.serial,
        )
    assert outcomes["refused"] > 1400, outcomes


# --- reading a token file -------------------------------------------------------------------


def test_garbage_empty_and_oversized_files_are_refused(tmp_path):
    garbage, empty, big = tmp_path / "garbage.tsr", tmp_path / "empty.tsr", tmp_path / "big.tsr"
    garbage.write_bytes(b"\x30\x82\x01\x00 not DER at all")
    empty.write_bytes(b"")
    big.write_bytes(b"\x30" * (MAX_TOKEN_BYTES + 1))
    refused(read_token, garbage, match=f"{garbage}: not an RFC 3161 timestamp response")
    refused(read_token, empty, match=f"{empty}: empty")
    refused(read_token, big, match=f"{big}: {MAX_TOKEN_BYTES + 1} bytes, over")
    refused(read_token, tmp_path / "absent.tsr", match="cannot read the timestamp token")
    refused(read_token, tmp_path, match="not a regular file")
    refused(parse_token, b"\x00" * 64, "upload", match="upload: not an RFC 3161")


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "plan.tsr"
    os.mkfifo(fifo)
    outcome = []

    def read():
        try:
            read_token(fifo)
        except TimestampError as e:
            outcome.append(str(e))

    # a thread: were the FIFO opened, open() would block with no writer, and the test would hang
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "read_token blocked on a FIFO"
    assert outcome == [f"{fifo}: the timestamp token is not a regular file"]


# --- fetch_token's refusals ----------------------------------------------------------------


def test_a_tsa_that_is_down_is_named(authorities):
    with TsaServer(authorities[0]) as server:
        url = f"{server.url}/tsr"
        fetch_token(url, PLAN)
    # the server is stopped: its port refuses connections
    refused(fetch_token, url, PLAN, match=f"{url}: cannot reach the TSA .*Connection refused")
    refused(fetch_token, f"http://127.0.0.1:{free_port()}/tsr", PLAN, match="cannot reach the TSA")


@pytest.mark.parametrize(
    "path, match",
    [
        ("/500", "the TSA answered HTTP 500"),
        ("/garbage", "not an RFC 3161 timestamp response"),
        ("/big", f"the answer is over {MAX_TOKEN_BYTES} bytes"),
        ("/other", f"the token is over {hashlib.sha256(b'another plan').hexdigest()}, the request was over {PLAN_SHA}"),
        (f"/stale/{PLAN_SHA}", "the token's nonce is not the request's"),
        ("/nocert", "the token embeds no certificate, though the request asked for it"),
    ],
    ids=["http-500", "garbage", "too-big", "another-digest", "another-nonce", "no-certificate"],
)
def test_a_tsa_that_misbehaves_is_named(tsa, path, match):
    url = f"{tsa.url}{path}"
    message = refused(fetch_token, url, PLAN, match=match)
    assert message.startswith(url)


def test_only_http_urls_and_a_plan_are_asked_for(tsa):
    refused(fetch_token, "file:///etc/passwd", PLAN, match="not an http")
    refused(fetch_token, "freetsa.org/tsr", PLAN, match="not an http")
    refused(fetch_token, "http://127.0.0.1:abc/tsr", PLAN, match="http://127.0.0.1:abc/tsr: not a URL")
    refused(fetch_token, f"{tsa.url}/tsr", b"", match="cannot timestamp an empty plan")


def test_the_timeout_is_named(authorities):
    """A TSA that accepts the connection and never answers: the timeout, named, not a traceback."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/tsr"
        refused(fetch_token, url, PLAN, 0.5, match=f"{url}: no complete answer within the deadline")


# --- issue 60: every reply real authorities send; one signature, one lock; a bounded exchange ---


@pytest.mark.parametrize(
    "options",
    [
        {"chain": True},
        {"chain": True, "intermediate": True},
        {"rsa": True},
        {"ess_v1": True},
        {"rsa": True, "ess_v1": True, "intermediate": True, "chain": True},
    ],
    ids=["chain", "chain-with-intermediate", "rsa", "ess-cert-id-v1", "all"],
)
def test_every_reply_openssls_own_tsa_sends_is_read_and_verified(tmp_path, plan_file, options):
    """openssl's TSA with ``certs =`` sends its chain in the file's order, which is not DER's order
    for a SET (rfc3161-client alone refuses it: InvalidSetOrdering); with RSA keys, ESSCertID v1
    and an intermediate CA too. Each token is read, verified against the root, and openssl agrees."""
    authority = make_authority(tmp_path / "tsa", "real", **options)
    body = authority.token(PLAN_SHA)
    token = verify_token(body, PLAN_SHA, authority.ca_pem)
    assert token.imprint_sha256 == PLAN_SHA and token.tsa_subject == "CN=real TSA,O=real"
    assert token.certificates == (1 + options.get("intermediate", False) + 1 if options.get("chain") else 1)
    (tmp_path / "r.tsr").write_bytes(body)
    done = authority.openssl_verify(tmp_path / "r.tsr", plan_file)
    assert done.returncode == 0 and "Verification: OK" in done.stdout, done.stdout + done.stderr


def _variant(body: bytes, change) -> bytes:
    from asn1crypto import tsp

    reply = tsp.TimeStampResp.load(body)
    change(reply)
    return reply.dump(force=False)


def test_one_signature_gives_one_signed_sha256_whatever_the_unsigned_parts_say(tmp_path):
    """A status text or another certificate set changes the reply's bytes, not what the TSA signed:
    every variant has another file sha256 (the lock of plan v4) and the same signed sha256 (plan
    v5's), and still verifies."""
    from asn1crypto import cms, tsp

    authority = make_authority(tmp_path / "tsa", "real", chain=True, intermediate=True)
    body = authority.token(PLAN_SHA)

    def status_text(reply):
        reply["status"] = tsp.PKIStatusInfo({"status": "granted", "status_string": ["granted, as asked"]})

    def without_the_root(reply):
        signed = reply["time_stamp_token"]["content"]
        kept = [c for c in signed["certificates"] if c.chosen.subject.native["common_name"] != "real CA"]
        signed["certificates"] = cms.CertificateSet(kept)

    variants = [body, _variant(body, status_text), _variant(body, without_the_root)]
    tokens = [parse_token(v, "variant") for v in variants]
    assert len({t.sha256 for t in tokens}) == 3
    assert len({t.signed_sha256 for t in tokens}) == 1
    for v in variants:
        verify_token(v, PLAN_SHA, authority.ca_pem)


def test_a_redirect_to_http_is_followed_and_to_another_scheme_is_refused(tsa, authorities):
    body = fetch_token(f"{tsa.url}/moved", PLAN, timeout=10)
    assert verify_token(body, PLAN_SHA, authorities[0].ca_pem).imprint_sha256 == PLAN_SHA
    message = refused(fetch_token, f"{tsa.url}/to-ftp", PLAN, match="redirects \\(HTTP 302\\) to a non-http\\(s\\) URL")
    assert "()" not in message


def test_a_trickling_tsa_meets_one_deadline_for_the_whole_exchange(tsa):
    """A byte every 0.3 s keeps each read alive; the deadline bounds the exchange."""
    import time

    start = time.monotonic()
    refused(fetch_token, f"{tsa.url}/trickle", PLAN, 1.5, match="no complete answer within the deadline")
    assert time.monotonic() - start < 5


def test_a_garbage_answer_is_one_named_line_without_parser_internals(tsa):
    message = refused(fetch_token, f"{tsa.url}/garbage", PLAN, match="not an RFC 3161 timestamp response")
    assert message == f"{tsa.url}/garbage: not an RFC 3161 timestamp response (DER TimeStampResp)"
    assert "ParseError" not in message and "\n" not in message


def test_a_real_public_authoritys_reply_is_read_and_verified(tmp_path):
    """Replies of Sigstore's public staging TSA (tests/fixtures/tsa/README.md says where they come
    from): one verifies against its root alone; one without an embedded certificate reads, says it
    carries none (so `cotdyn register` refuses it), and cannot be verified."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    fixtures = Path(__file__).parent / "fixtures" / "tsa"
    hello = hashlib.sha256(b"hello").hexdigest()
    chain = x509.load_pem_x509_certificates((fixtures / "sigstage-chain.pem").read_bytes())
    root = tmp_path / "root.pem"
    root.write_bytes(b"".join(c.public_bytes(Encoding.PEM) for c in chain if c.subject == c.issuer))
    token = verify_token((fixtures / "sigstage-sha256.tsr").read_bytes(), hello, root)
    assert token.tsa_subject == "CN=sigstore-tsa,O=sigstore.dev" and token.certificates == 1
    assert token.gen_time == datetime.datetime(2025, 5, 9, 11, 58, 55, tzinfo=datetime.timezone.utc)
    bare = fixtures / "sigstage-no-embedded-cert.tsr"
    assert read_token(bare).certificates == 0
    refused(verify_token, bare.read_bytes(), hello, root, match="does not verify against")
