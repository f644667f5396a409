"""len() on a node of several ranks: the first rank to ask plans the node and publishes it; the
others count their own row instead of each planning the whole node again."""

from __future__ import annotations

import os
import secrets
import selectors
import subprocess
import sys
from pathlib import Path

import pytest

import streaming.dataset.session as session_module
from streaming import StreamingDataset
from tests.dataset.conftest import write_ids

REPO = Path(__file__).resolve().parents[2]
RANK0 = """
import sys
from streaming import StreamingDataset
ds = StreamingDataset(local=sys.argv[1], shuffle=True, batch_size=4)
print(len(ds), flush=True)
sys.stdin.read()
ds.close()
"""


def _launcher_env(rank: int, run: str) -> dict[str, str]:
    return {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1",
            "TORCHELASTIC_RUN_ID": run}


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout), "rank 0 did not report its length in time"
    return proc.stdout.readline().strip()


def test_a_second_rank_takes_its_length_from_the_published_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_ids(tmp_path / "data", 600)
    run = secrets.token_hex(4)
    rank0 = subprocess.Popen(
        [sys.executable, "-c", RANK0, str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), **_launcher_env(0, run)))
    try:
        assert _first_line(rank0, 120) == "300"
        for name, value in _launcher_env(1, run).items():
            monkeypatch.setenv(name, value)
        calls: list[int] = []
        real = session_module.plan_node

        def counting(*args, **kwargs):
            calls.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(session_module, "plan_node", counting)
        ds = StreamingDataset(local=str(data), shuffle=True, batch_size=4)
        try:
            assert len(ds) == 300
            assert calls == [], "rank 1 planned the whole node again"
        finally:
            ds.close()
    finally:
        rank0.communicate("", timeout=60)
    assert rank0.returncode == 0
