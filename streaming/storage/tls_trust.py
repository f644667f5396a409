"""A store whose TLS certificate this process does not trust: found wherever a transport
buried the cause (http.client raises it, urllib3 wraps it in its own SSLError and MaxRetryError,
requests and botocore in theirs), and reported once, as an `UntrustedCertificateError` that
says which setting adds the authority that signed it. Behind a company's TLS-inspecting proxy or
with a private store, that is the whole fix; a retry never is."""

from __future__ import annotations

import ssl

from streaming.errors import UntrustedCertificateError

S3_SETTING = "AWS_CA_BUNDLE"  # boto3 and our S3 GETs
HTTPS_SETTING = "SSL_CERT_FILE"  # the https:// backend (Python's ssl defaults)
REQUESTS_SETTING = "REQUESTS_CA_BUNDLE"  # GCS and Azure (their HTTP sessions are requests')
_MAX_DEPTH = 8


def untrusted(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification failure behind `exc`, if that is what it is.

    Args:
        exc: a transport's exception.
    """
    seen: set[int] = set()
    todo: list[tuple[object, int]] = [(exc, 0)]
    while todo:
        item, depth = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(item))
        if isinstance(item, ssl.SSLCertVerificationError):
            return item
        inner = [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]
        todo.extend((x, depth + 1) for x in inner)
    return None


def untrusted_error(url: str, server: str, cause: ssl.SSLCertVerificationError,
                    setting: str) -> UntrustedCertificateError:
    """The error for a GET of `url` from `server`, whose certificate failed verification.

    Args:
        url: what was being read or written.
        server: the store's address, as the user configured it.
        cause: the verification failure.
        setting: the environment variable that names a certificate bundle to trust.
    """
    why = getattr(cause, "verify_message", None) or str(cause)
    return UntrustedCertificateError(
        f"{url}: the TLS certificate of {server} is not trusted ({why}). If it is signed by "
        f"your organisation's or the store's own authority, set {setting} to a PEM bundle that "
        "holds that authority's certificate")
