"""Storage: URL -> backend (local, file://, s3://, gs://, az://, http(s)://) and robust transfers.

Backends: local paths (and file://), S3 (s3://), Google Cloud Storage (gs://), Azure Blob
(az://, azure://, abfs(s)://, and https:// on an Azure account host), HTTP(S) (read-only), and
those added with `register_scheme`. Transfers on top keep deadlines, retry, fetch a file once
per node (single-flight) and check sizes.

    backend, path = backend_for("s3://bucket/data/index.json")
    fetch("s3://bucket/data/shard.00000.mds", "/cache/shard.00000.mds", expected_size=...)
"""

from streaming.storage.backend import Backend
from streaming.storage.retry import RetryPolicy
from streaming.storage.schemes import backend_for, join, open_url, register_scheme
from streaming.storage.singleflight import single_flight
from streaming.storage.transfer import fetch, fetch_once, upload

__all__ = [
    "Backend",
    "RetryPolicy",
    "backend_for",
    "fetch",
    "fetch_once",
    "join",
    "open_url",
    "register_scheme",
    "single_flight",
    "upload",
]
