"""Words for where S3 requests go, for the messages of a store that cannot be reached: the
endpoint and the setting that chose it, or AWS itself, and how to point requests elsewhere."""

from __future__ import annotations

import os

ENDPOINT_ENV = "S3_ENDPOINT_URL"
# botocore's own endpoint settings, most specific first (it reads them when ours is unset).
BOTOCORE_ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def unreachable(url: str, endpoint_url: str | None, cause: BaseException) -> str:
    """The message for `url` whose store did not answer: what the request went to, the
    failure, and what to check or set.

    Args:
        url: the object being read or written.
        endpoint_url: the backend's endpoint (None: botocore's choice, AWS by default).
        cause: the connection failure.
    """
    if endpoint_url:
        setting = ENDPOINT_ENV if os.environ.get(ENDPOINT_ENV) == endpoint_url else None
    else:
        setting = next((n for n in BOTOCORE_ENDPOINT_ENV if os.environ.get(n)), None)
        endpoint_url = os.environ.get(setting) if setting else None
    if endpoint_url:
        given = f" (from {setting})" if setting else ""
        return (f"{url}: cannot reach the S3 endpoint {endpoint_url}{given}: {cause}. Check "
                "that the server is up and listening at that address")
    return (f"{url}: cannot reach AWS S3 ({cause}). For an S3-compatible server (MinIO, Ceph, "
            f"R2, ...) set {ENDPOINT_ENV} (or AWS_ENDPOINT_URL) to its address; for AWS itself "
            "check this machine's network and proxy settings (HTTPS_PROXY)")
