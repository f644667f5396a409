"""PlanBoard: the first process to ask for a node plan computes and publishes it, the others copy
their row; a failed computation publishes nothing; a plan whose publisher left is recomputed."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.coord import Namespace, PlanBoard
from tests.coord import workers


def test_the_first_asker_computes_and_the_others_copy_their_row(tmp_path):
    ns = Namespace.for_job([tmp_path])
    first, second = PlanBoard(ns), PlanBoard(ns)
    plan = workers.plan_for(3)
    calls: list[str] = []

    def compute() -> np.ndarray:
        calls.append("computed")
        return plan

    def never() -> np.ndarray:
        raise AssertionError("the plan was published: nobody computes it again")

    try:
        assert np.array_equal(first.slice("e3", compute, 1, 2), plan[1, 2])
        row = second.slice("e3", never, 0, 1)
        assert np.array_equal(row, plan[0, 1]) and row.flags.writeable  # a private copy
        assert calls == ["computed"]
        assert np.array_equal(second.slice("e4", lambda: plan + 1, 0, 0), plan[0, 0] + 1)
    finally:
        first.close()
        second.close()


def test_a_failed_computation_publishes_nothing_and_a_closed_publisher_is_recomputed(tmp_path):
    ns = Namespace.for_job([tmp_path])
    board = PlanBoard(ns)
    with pytest.raises(ZeroDivisionError):
        board.slice("e0", lambda: 1 // 0, 0, 0)
    assert np.array_equal(board.slice("e0", lambda: workers.plan_for(0), 0, 0),
                          workers.plan_for(0)[0, 0])
    board.close()  # its plans are gone: the next asker computes again
    other = PlanBoard(ns)
    try:
        assert np.array_equal(other.slice("e0", lambda: workers.plan_for(0) + 5, 0, 0),
                              workers.plan_for(0)[0, 0] + 5)
    finally:
        other.close()


def test_a_board_keeps_only_its_latest_plans_alive(tmp_path):
    ns = Namespace.for_job([tmp_path])
    board, peer = PlanBoard(ns), PlanBoard(ns)
    try:
        for epoch in range(3):
            board.slice(f"e{epoch}", lambda epoch=epoch: workers.plan_for(epoch), 0, 0, keep=2)
        recomputed = peer.slice("e0", lambda: workers.plan_for(0) + 9, 0, 0)
        assert np.array_equal(recomputed, workers.plan_for(0)[0, 0] + 9)  # e0 was let go
        kept = peer.slice("e2", lambda: workers.plan_for(2) + 9, 0, 0)
        assert np.array_equal(kept, workers.plan_for(2)[0, 0])  # e2 still published
    finally:
        board.close()
        peer.close()
