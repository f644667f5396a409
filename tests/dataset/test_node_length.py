"""len() on a node of several ranks: the first rank to ask plans the node and publishes it; the
others count their own row instead of each planning the whole node again."""

from __future__ import annotations

import os
import secrets
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

import streaming.dataset.plan_view as plan_view_module
from streaming import StreamingDataset
from tests.support.datasets import write_ids
from tests.support.fresh import fresh_context


def _rank0(env: dict[str, str], data: Path, conn: Connection) -> None:
    """Rank 0 in a fresh process: report len(), then hold the dataset until told to go."""
    os.environ.update(env)
    ds = StreamingDataset(local=str(data), shuffle=True, batch_size=4)
    conn.send(len(ds))
    conn.recv()
    ds.close()


def _launcher_env(rank: int, run: str) -> dict[str, str]:
    return {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1",
            "TORCHELASTIC_RUN_ID": run}


def test_a_second_rank_takes_its_length_from_the_published_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_ids(tmp_path / "data", 600)
    run = secrets.token_hex(4)
    ctx = fresh_context()
    conn, child = ctx.Pipe()
    rank0 = ctx.Process(target=_rank0, args=(_launcher_env(0, run), data, child))
    rank0.start()
    child.close()
    try:
        assert conn.poll(120), "rank 0 did not report its length in time"
        assert conn.recv() == 300
        for name, value in _launcher_env(1, run).items():
            monkeypatch.setenv(name, value)
        calls: list[int] = []
        real = plan_view_module.plan_node

        def counting(*args, **kwargs):
            calls.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(plan_view_module, "plan_node", counting)
        ds = StreamingDataset(local=str(data), shuffle=True, batch_size=4)
        try:
            assert len(ds) == 300
            assert calls == [], "rank 1 planned the whole node again"
        finally:
            ds.close()
    finally:
        conn.send("go")
        rank0.join(60)
    assert rank0.exitcode == 0
