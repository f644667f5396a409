"""Storage: URL -> backend (local paths, file://, s3://) and robust transfers on top.

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
