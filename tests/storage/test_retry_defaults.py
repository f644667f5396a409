"""Retry and timeout defaults come from one place (storage/retry.py): every download, upload,
backend and writer starts from the same numbers."""

from __future__ import annotations

import inspect

from streaming.storage import retry
from streaming.storage.http import HTTPBackend
from streaming.storage.retry import RetryPolicy
from streaming.storage.streamed import stream_object
from streaming.storage.transfer import fetch, upload
from writers import MDSWriter
from writers.merge_remote import merge_remote_index
from writers.upload import Uploader


def _default(func, name: str):
    return inspect.signature(func).parameters[name].default


def test_downloads_and_uploads_share_the_defaults() -> None:
    assert RetryPolicy().attempts == retry.RETRY + 1
    assert RetryPolicy().timeout == retry.TIMEOUT
    for func in (fetch, upload, stream_object):
        assert _default(func, "retry") == retry.RETRY
        assert _default(func, "timeout") == retry.TIMEOUT
    backend = HTTPBackend("http", "127.0.0.1")
    assert (backend.connect_timeout, backend.read_timeout) == (retry.CONNECT_TIMEOUT,
                                                               retry.TIMEOUT)


def test_writers_share_the_defaults() -> None:
    for func in (MDSWriter.__init__, Uploader.__init__, merge_remote_index):
        assert _default(func, "retry") == retry.RETRY
    for func in (MDSWriter.__init__, Uploader.__init__):
        assert _default(func, "timeout") == retry.UPLOAD_TIMEOUT
