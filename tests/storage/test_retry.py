"""RetryPolicy: which failures are retried, how long it may take, what it raises at the end."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import (
    AccessDeniedError,
    DownloadTimeoutError,
    HashMismatchError,
    ObjectNotFoundError,
    StorageError,
)
from streaming.storage import retry
from streaming.storage.retry import RetryPolicy, is_retryable, status_retryable


class Flaky:
    """Fails with the given errors in turn, then returns 'ok'; records each deadline."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.deadlines: list[float] = []

    def __call__(self, deadline: float) -> str:
        self.deadlines.append(deadline)
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


@pytest.fixture
def sleeps(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(retry, "_sleep", slept.append)
    return slept


def test_transient_failures_are_retried_with_fresh_deadlines(sleeps):
    action = Flaky(StorageError("s3://b/k: 503"), DownloadTimeoutError("s3://b/k: stalled"))
    before = time.monotonic()
    assert RetryPolicy(attempts=3, timeout=7.0).run("s3://b/k", action) == "ok"
    assert len(action.deadlines) == 3 and len(sleeps) == 2
    assert all(before + 7.0 <= d <= time.monotonic() + 7.0 for d in action.deadlines)


def permanent(message: str) -> StorageError:
    error = StorageError(message)
    error.retryable = False
    return error


@pytest.mark.parametrize(
    "error",
    [
        ObjectNotFoundError("gone"), AccessDeniedError("no"), HashMismatchError("bad"),
        permanent("400 bad request"), ValueError(),
    ],
)
def test_permanent_failures_are_raised_at_once(sleeps, error):
    action = Flaky(error)
    with pytest.raises(type(error)):
        RetryPolicy(attempts=5).run("x", action)
    assert len(action.deadlines) == 1 and sleeps == []
    assert not is_retryable(error)


def test_giving_up_names_the_target_attempts_and_last_cause(sleeps):
    last = DownloadTimeoutError("read timed out")
    with pytest.raises(DownloadTimeoutError, match=r"s3://b/k: failed after 2 attempt\(s\); last "
                       r"error: read timed out") as info:
        RetryPolicy(attempts=2).run("s3://b/k", Flaky(StorageError("reset"), last))
    assert info.value.__cause__ is last
    with pytest.raises(StorageError, match="after 1 attempt") as info:
        RetryPolicy(attempts=1).run("u", Flaky(StorageError("500")))
    assert not isinstance(info.value, DownloadTimeoutError)


@given(
    attempts=st.integers(1, 8),
    backoff=st.floats(0.0, 5.0),
    max_backoff=st.floats(0.0, 20.0),
)
def test_backoff_stays_within_the_budget(attempts, backoff, max_backoff):
    slept: list[float] = []
    original, retry._sleep = retry._sleep, slept.append
    try:
        policy = RetryPolicy(attempts, timeout=1.0, backoff=backoff, max_backoff=max_backoff)
        with pytest.raises(StorageError):
            policy.run("u", Flaky(*[StorageError("e")] * attempts))
    finally:
        retry._sleep = original
    assert len(slept) == attempts - 1
    assert all(0.0 <= s <= min(max_backoff, backoff * 2**i) for i, s in enumerate(slept))
    assert sum(slept) <= policy.budget() - attempts * policy.timeout + 1e-9


def test_bad_policies_are_refused():
    with pytest.raises(ValueError, match="at least one attempt"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="timeout must be positive"):
        RetryPolicy(timeout=0)


@pytest.mark.parametrize(("status", "retryable"), [
    (500, True), (503, True), (408, True), (429, True), (None, True),
    (400, False), (404, False), (416, False),
])
def test_only_server_errors_timeouts_and_throttling_are_asked_again(status, retryable):
    assert status_retryable(status) is retryable
