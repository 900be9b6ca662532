"""Attested time for a registration (issue 48): an RFC 3161 timestamp token over the plan's sha256.

REGISTERED's date is typed by the author; a token from a time-stamping authority (TSA) says, under
the TSA's signature, that the plan's sha256 existed at the token's genTime. The token file is a
TimeStampResp, DER: what ``openssl ts -reply`` writes and what a TSA answers over HTTP (a .tsr).
The ASN.1 is rfc3161-client's (Trail of Bits; the CMS signature check is OpenSSL's PKCS7_verify),
and asn1crypto's for the two things rfc3161-client does not do: reading a reply whose certificates
are not in DER's order (``normalized_reply``: a CMS SignedData's certificates are a SET, their order
is outside the signature, and openssl's own TSA sends its chain unsorted), and giving the bytes of
the signed TSTInfo (``Token.signed_sha256``: what the TSA signed, the lock of plan v5 on).

- ``timestamp_request(plan_bytes)``: a DER TimeStampReq over sha256(plan_bytes), with a nonce and
  certReq, as ``openssl ts -query -data plan.yaml -sha256 -cert`` makes.
- ``fetch_token(url, plan_bytes)``: POSTs one to a TSA and returns the response's bytes, checked.
- ``read_token(path)`` / ``parse_token(data, source)``: a Token, the fields a page or audit shows.
- ``verify_token(data, expected_sha256_hex, ca_pem_path)``: the token is over the registration's
  sha256 and its signature chains to the CA certificate the reviewer supplies.

Every failure is a ``TimestampError`` naming where (URL or file) and why.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

import cryptography.x509
from cryptography.utils import CryptographyDeprecationWarning
from rfc3161_client import (
    HashAlgorithm,
    PKIStatus,
    TimestampRequestBuilder,
    TimeStampResponse,
    VerifierBuilder,
    decode_timestamp_response,
)

# A TimeStampResp is a few KiB (a signature and the TSA's certificate chain); the bound keeps a
# wrong file (a plan, an archive) from being read whole, on the command line or from a server.
MAX_TOKEN_BYTES = 1 << 20
SHA256_OID = cryptography.x509.ObjectIdentifier("2.16.840.1.101.3.4.2.1")


class TimestampError(ValueError):
    pass


@dataclass(frozen=True)
class Token:
    imprint_sha256: str  # hex: the digest the TSA signed (the plan's sha256)
    gen_time: datetime.datetime  # aware, UTC: when the TSA says it signed
    tsa_subject: str | None  # the signing certificate's subject (RFC 4514), else the TSA name field
    serial: int  # the TSA's serial number of the token
    sha256: str  # hex, of the token file's bytes: what a registration records to name the file
    signed_sha256: str  # hex, of the TSTInfo the TSA signed: the same for every file that carries one signature
    certificates: int  # how many certificates the reply embeds (0: no reviewer can verify it)


# --- request and fetch --------------------------------------------------------------------


def _request(plan_bytes: bytes):
    # rfc3161-client hashes the data itself (it has no builder for a precomputed digest), so the
    # request is made from the plan's bytes; its imprint is then the plan's sha256 by construction.
    if not plan_bytes:
        raise TimestampError("cannot timestamp an empty plan")
    return (
        TimestampRequestBuilder()
        .data(plan_bytes)
        .hash_algorithm(HashAlgorithm.SHA256)
        .nonce(nonce=True)
        .cert_request(cert_request=True)
        .build()
    )


def timestamp_request(plan_bytes: bytes) -> bytes:
    """A DER TimeStampReq over sha256(plan_bytes), with a random nonce and certReq true."""
    return _request(plan_bytes).as_bytes()


def fetch_token(url: str, plan_bytes: bytes, timeout: float = 30) -> bytes:
    """Ask the TSA at ``url`` for a token over sha256(plan_bytes); return the TimeStampResp's bytes
    (the .tsr to store). The response must be granted, over the request's imprint, carry the
    request's nonce (so it answers this request, not a replayed one) and embed the signing
    certificate (certReq: a reviewer verifies it with the CA certificate alone). ``timeout`` bounds
    the whole exchange, redirects included (``cotdyn.plan.tsa_http``)."""
    from cotdyn.plan.tsa_http import post

    request = _request(plan_bytes)
    body = post(url, request.as_bytes(), timeout, MAX_TOKEN_BYTES, TimestampError)
    token = parse_token(body, url)
    asked = request.message_imprint.message.hex()
    if token.imprint_sha256 != asked:
        raise TimestampError(f"{url}: the token is over {token.imprint_sha256}, the request was over {asked}")
    response = decode_timestamp_response(normalized_reply(body, url))  # parse_token read it: no error here
    try:
        nonce = response.tst_info.nonce
    except Exception:  # the nonce is optional in a token: absent, it cannot be this request's
        nonce = None
    if nonce != request.nonce:
        raise TimestampError(f"{url}: the token's nonce is not the request's (a reply to another request)")
    if not token.certificates:
        raise TimestampError(f"{url}: the token embeds no certificate, though the request asked for it")
    return normalized_reply(body, url)


# --- read and parse -----------------------------------------------------------------------


def _read_bounded(path: str | Path, what: str) -> bytes:
    """A regular file's bytes, at most MAX_TOKEN_BYTES; stat first, so a FIFO or a device named on
    the command line is refused rather than opened (opening a FIFO blocks until a writer comes)."""
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as e:
        raise TimestampError(f"{path}: cannot read the {what} ({e.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise TimestampError(f"{path}: the {what} is not a regular file")
    if info.st_size > MAX_TOKEN_BYTES:
        raise TimestampError(f"{path}: {info.st_size} bytes, over the {MAX_TOKEN_BYTES} a {what} may have")
    try:
        # O_NONBLOCK: were the path swapped for a FIFO after the stat, open() still returns at once
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_TOKEN_BYTES + 1)
    except OSError as e:
        raise TimestampError(f"{path}: cannot read the {what} ({e.strerror})") from None
    if len(data) > MAX_TOKEN_BYTES:
        raise TimestampError(f"{path}: over the {MAX_TOKEN_BYTES} bytes a {what} may have")
    return data


NOT_A_RESPONSE = "not an RFC 3161 timestamp response (DER TimeStampResp)"


def _signed_data(data: bytes, source: str):
    """The reply's SignedData as asn1crypto reads it (strictly: no trailing bytes). asn1crypto parses
    lazily, and only the parts read here are parsed: the certificates stay bytes, and the TSTInfo the
    bytes the signature covers (rfc3161-client reads and verifies the rest)."""
    from asn1crypto import tsp

    try:
        return tsp.TimeStampResp.load(data, strict=True)["time_stamp_token"]["content"]
    except Exception:  # its errors are ValueError, TypeError and others: all one case, a malformed file
        raise TimestampError(f"{source}: {NOT_A_RESPONSE}") from None


def normalized_reply(data: bytes, source: str) -> bytes:
    """``data`` with its certificates in DER's order (sorted by their encodings), which is how
    rfc3161-client reads a SET; the same bytes when they already are, or when asn1crypto cannot
    read them (it requires the token that a refusal lacks): rfc3161-client then judges them alone.
    Nothing signed changes: the certificates lie outside the signature."""
    from asn1crypto import cms, tsp

    try:
        reply = tsp.TimeStampResp.load(data, strict=True)
        signed = reply["time_stamp_token"]["content"]
        encoded = [c.dump() for c in signed["certificates"] or []]
    except Exception:  # unreadable here: rfc3161-client names it
        return data
    if encoded == sorted(encoded):
        return data
    signed["certificates"] = cms.CertificateSet([cms.CertificateChoices.load(c) for c in sorted(encoded)])
    return reply.dump()


def signed_content_sha256(data: bytes, source: str) -> str:
    """sha256 of the TSTInfo's DER, the content the TSA's signature covers (its messageDigest):
    fixed by the signature, whatever the reply's unsigned parts say."""
    try:
        content = _signed_data(data, source)["encap_content_info"]["content"].contents
    except TimestampError:
        raise
    except Exception:
        raise TimestampError(f"{source}: {NOT_A_RESPONSE}") from None
    return hashlib.sha256(content).hexdigest()


def _decode(data: bytes, source: str) -> TimeStampResponse:
    if not data:
        raise TimestampError(f"{source}: empty, not a timestamp response")
    if len(data) > MAX_TOKEN_BYTES:
        raise TimestampError(f"{source}: {len(data)} bytes, over the {MAX_TOKEN_BYTES} a timestamp response may have")
    try:
        response = decode_timestamp_response(normalized_reply(data, source))
    except TimestampError:
        raise
    except Exception:  # the parser's errors are ValueErrors; any other is a malformed file too
        raise TimestampError(f"{source}: {NOT_A_RESPONSE}") from None
    if response.status != PKIStatus.GRANTED:
        try:
            status = PKIStatus(response.status).name.lower()
        except ValueError:
            status = str(response.status)
        said = "; ".join(response.status_string)
        raise TimestampError(
            f"{source}: the TSA did not grant the token (status {status}{': ' + said if said else ''})"
        )
    return response


def _signer(response: TimeStampResponse) -> cryptography.x509.Certificate | None:
    """The embedded certificate the SignerInfo names (issuer and serial: covered by the signature)."""
    infos = list(response.signed_data.signer_infos)
    if len(infos) != 1:
        return None
    # cryptography warns (CryptographyDeprecationWarning) on a certificate RFC 5280 disallows, e.g. a
    # serial number <= 0: such a certificate is the signature check's to refuse, and the warning
    # would reach the terminal of the person running `cotdyn audit` as noise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        for der in response.signed_data.certificates:
            cert = cryptography.x509.load_der_x509_certificate(der)
            if cert.issuer == infos[0].issuer and cert.serial_number == infos[0].serial_number:
                return cert
    return None


def _tsa_subject(response: TimeStampResponse) -> str | None:
    signer = _signer(response)  # an unreadable certificate raises: the token is malformed
    if signer is not None:
        return signer.subject.rfc4514_string()
    try:
        name = response.tst_info.name
    except Exception:
        # the tsa field is optional and only informative: absent (ValueError), or a name form the
        # library does not map (KeyError) leaves the TSA unnamed rather than the token refused
        return None
    if name is None:
        return None
    value = name.value
    return value.rfc4514_string() if isinstance(value, cryptography.x509.Name) else str(value)


def parse_token(data: bytes, source: str) -> Token:
    """The Token a TimeStampResp carries; a named error if it is not one, is not granted, or its
    imprint is not a sha256. ``source`` (a path or URL) names it in errors. Checks no signature."""
    response = _decode(data, source)
    try:
        info = response.tst_info
        imprint = info.message_imprint
        if imprint.hash_algorithm != SHA256_OID:
            raise TimestampError(
                f"{source}: the token's imprint is not a sha256 ({imprint.hash_algorithm.dotted_string})"
            )
        gen_time = info.gen_time
        serial = info.serial_number
        message = imprint.message
        tsa_subject = _tsa_subject(response)
        certificates = len(response.signed_data.certificates)
    except TimestampError:
        raise
    except Exception as e:
        # the readers raise more than ValueError on malformed content (cryptography's InvalidVersion
        # for a damaged certificate, found by tests/test_timestamp.py's mutations): all are one case
        raise TimestampError(f"{source}: a granted response without a readable token ({type(e).__name__})") from None
    if gen_time.tzinfo is None:  # genTime is GeneralizedTime, UTC by RFC 3161
        gen_time = gen_time.replace(tzinfo=datetime.timezone.utc)
    return Token(
        imprint_sha256=message.hex(),
        gen_time=gen_time.astimezone(datetime.timezone.utc),
        tsa_subject=tsa_subject,
        serial=serial,
        sha256=hashlib.sha256(data).hexdigest(),
        signed_sha256=signed_content_sha256(data, source),
        certificates=certificates,
    )


def read_token(path: str | Path) -> Token:
    """The Token in a .tsr file (a regular file of at most MAX_TOKEN_BYTES)."""
    return parse_token(_read_bounded(path, "timestamp token"), str(path))


# --- verify -------------------------------------------------------------------------------


def _ca_certificates(ca_pem_path: str | Path) -> list[cryptography.x509.Certificate]:
    data = _read_bounded(ca_pem_path, "CA certificate file")
    try:
        return cryptography.x509.load_pem_x509_certificates(data)
    except ValueError:
        pass
    try:  # some TSAs publish their CA certificate as DER (.crt, .cer)
        return [cryptography.x509.load_der_x509_certificate(data)]
    except ValueError:
        raise TimestampError(f"{ca_pem_path}: no certificate (PEM or DER) in the CA certificate file") from None


def verify_token(
    data: bytes, expected_sha256_hex: str, ca_pem_path: str | Path, source: str = "timestamp token"
) -> Token:
    """The Token, if the token is over ``expected_sha256_hex`` (the registration's plan sha256) and
    its signature chains to a certificate in ``ca_pem_path`` (the TSA's CA, PEM, one or more);
    otherwise a named error. The chain is checked at the token's genTime, so a token outlives its
    TSA certificate's expiry; revocation is not checked (no CRL or OCSP: the check is offline)."""
    expected = str(expected_sha256_hex).strip().lower()
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise TimestampError(f"{source}: {expected_sha256_hex!r} is not a sha256 (64 hex digits)")
    token = parse_token(data, source)
    if token.imprint_sha256 != expected:
        raise TimestampError(f"{source}: the token is over {token.imprint_sha256}, the registration is {expected}")
    roots = _ca_certificates(ca_pem_path)
    builder = VerifierBuilder()
    for root in roots:
        builder = builder.add_root_certificate(root)
    # No tsa_certificate() from the token's own certificates: the builder adds that certificate to
    # the trusted set, and a self-signed TSA certificate would then vouch for itself (a forger's token
    # verified against any CA; tests/test_timestamp.py checks it does not). The embedded certificates
    # serve as the untrusted chain from the signer to a root, as in `openssl ts -verify -CAfile`.
    try:
        builder.build().verify(decode_timestamp_response(normalized_reply(data, source)), bytes.fromhex(expected))
    except Exception as e:  # VerificationError, or the readers' errors on a malformed token (see parse_token)
        raise TimestampError(
            f"{source}: the signature does not verify against the CA certificate in {ca_pem_path} ({_short(e)})"
        ) from None
    return token


def _short(e: Exception) -> str:
    """The library's reason, without OpenSSL's error-stack dump (file names and line numbers)."""
    text = str(e)
    if "ErrorStack" in text:
        reason = text.split('data: "', 1)[-1].split('"', 1)[0] if 'data: "' in text else ""
        return f"{text.split(':', 1)[0]}: {reason}" if reason else text.split(": Unable", 1)[0]
    return text


# --- for cotdyn register and the audit (added by the lead) --------------------------------


def read_token_bytes(path: str | Path) -> bytes:
    """A token file's bytes, bounded and from a regular file only (``_read_bounded``)."""
    return _read_bounded(path, "timestamp token")


def read_plan_bytes(path: str | Path) -> bytes:
    """The plan file's bytes, to send a timestamp authority (its sha256 is the registration's)."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TimestampError(f"{path}: cannot read the plan ({e.strerror})") from None
