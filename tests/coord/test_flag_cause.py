"""The failure flag carries the root cause's class and the epoch it failed in: a peer raises
that class with the failing process's message, and a later epoch clears the flag."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.coord.flag import FailureFlag, cause_error
from streaming.coord.wait import wait_for
from streaming.errors import CoordinationError, HashMismatchError, MissingExtraError


def _flag() -> FailureFlag:
    return FailureFlag(np.zeros(512, np.uint8))


def test_peer_raises_the_root_cause_class_with_its_message():
    flag = _flag()
    flag.set("rank 0 worker 1: HashMismatchError: shard.00003.mds: sha1 differs",
             kind="HashMismatchError", epoch=4)
    with pytest.raises(HashMismatchError, match=r"rank 0 worker 1.*sha1 differs"):
        flag.raise_if_set("node")
    with pytest.raises(HashMismatchError, match="stopped waiting for x"):
        wait_for(lambda: None, what="x", timeout=5, flag=flag)
    assert flag.kind() == "HashMismatchError" and flag.epoch() == 4


@pytest.mark.parametrize("kind,expected", [
    ("FileNotFoundError", FileNotFoundError), ("KeyError", KeyError), ("", CoordinationError),
    ("NoSuchError", CoordinationError), ("SystemExit", CoordinationError),
    ("MissingExtraError", CoordinationError),  # its constructor takes other arguments
])
def test_unknown_or_unbuildable_classes_fall_back_to_coordination_error(kind, expected):
    error = cause_error(kind, "boom")
    assert type(error) is expected or (expected is CoordinationError
                                       and isinstance(error, CoordinationError))
    assert not isinstance(error, MissingExtraError)


def test_a_later_epoch_clears_the_flag_an_earlier_one_does_not():
    flag = _flag()
    flag.set("boom", kind="OSError", epoch=2)
    flag.clear_before(2)
    assert flag.reason() == "boom"
    flag.clear_before(3)
    assert flag.reason() is None
    assert flag.set("again", epoch=3)


def test_a_flag_without_epoch_is_never_cleared_by_epochs():
    flag = _flag()
    flag.set("boom")
    flag.clear_before(100)
    assert flag.reason() == "boom" and flag.kind() == ""
