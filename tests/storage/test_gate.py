"""The node-wide slow-down (storage/gate.py): what one process learns from a refusal holds for
every process of the node, the in-flight limit halves per wave of refusals and is lifted again
after a calm spell, and a full node makes a request wait (with a deadline)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from streaming.errors import DownloadTimeoutError
from streaming.storage import gate as gates
from streaming.storage.gate import NodeGate, gate_for


def _state_in_child(key: str, directory: str, out) -> None:
    state = NodeGate(key, directory=Path(directory)).state()
    out.put((state.limit, state.pause_until))


def _hold_and_try(key: str, directory: str, out) -> None:
    gate = NodeGate(key, directory=Path(directory))
    try:
        with gate.permit(time.monotonic() + 0.3, "s3://b/k"):
            out.put("entered")
    except DownloadTimeoutError as exc:
        out.put(str(exc))


def test_a_refusal_slows_down_every_process_of_the_node(tmp_path):
    gate = NodeGate("s3://bucket", directory=tmp_path)
    assert gate.state().calm
    assert gate.refused(retry_after=5.0) == pytest.approx(5.0, abs=0.5)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_state_in_child, args=("s3://bucket", str(tmp_path), out))
    child.start()
    limit, pause_until = out.get(timeout=60)
    child.join(timeout=60)
    assert limit == gates.START_LIMIT and pause_until == gate.state().pause_until
    assert NodeGate("s3://other", directory=tmp_path).state().calm  # another store is not slowed


def test_the_limit_halves_per_wave_and_is_lifted_after_calm(tmp_path, monkeypatch):
    gate = NodeGate("gs://bucket", directory=tmp_path)
    monkeypatch.setattr(gates, "WAVE", 0.0)
    limits = []
    for _ in range(4):
        gate.refused(retry_after=0.0)
        limits.append(gate.state().limit)
    assert limits == [4, 2, 1, 1]
    gate.succeeded()
    assert gate.state().limit == 1  # not calm yet: no raise
    monkeypatch.setattr(gates, "CALM", 0.0)
    monkeypatch.setattr(gates, "STEP", 0.0)
    raised = []
    while gate.state().limit:
        gate.succeeded()
        raised.append(gate.state().limit)
    assert raised == [*range(2, gates.MAX_LIMIT + 1), 0] and gate.state().calm


def test_a_full_node_makes_a_request_wait_until_its_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(gates, "WAVE", 0.0)
    gate = NodeGate("az://c", directory=tmp_path)
    for _ in range(3):
        gate.refused(retry_after=0.0)
    assert gate.state().limit == 1
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    with gate.permit(time.monotonic() + 5.0, "az://c/k"):  # holds the node's only slot
        child = ctx.Process(target=_hold_and_try, args=("az://c", str(tmp_path), out))
        child.start()
        refused = out.get(timeout=60)
        child.join(timeout=60)
    assert "outlasted the download deadline" in refused and "s3://b/k" in refused
    child = ctx.Process(target=_hold_and_try, args=("az://c", str(tmp_path), out))
    child.start()
    assert out.get(timeout=60) == "entered"  # the slot was freed with the block
    child.join(timeout=60)


def test_local_paths_have_no_gate_and_urls_share_one_per_bucket():
    assert gate_for("/data/x") is None and gate_for("file:///data/x") is None
    assert gate_for("s3://b/a/x").path == gate_for("s3://b/y").path
    assert gate_for("s3://b/x").path != gate_for("s3://c/x").path


def test_gate_files_stay_out_of_the_top_of_the_shared_memory_directory(tmp_path, monkeypatch):
    """Every throttled store leaves a small state file (and its slot files) for the node's
    next run; they live in one folder of their own, so the shared-memory directory that every
    node join lists does not fill up with them."""
    monkeypatch.setenv("STREAMING_SHM_DIR", str(tmp_path))
    for bucket in ("a", "b", "c"):
        gate = gate_for(f"s3://{bucket}/data/shard.mds")
        gate.refused(None)
        gate.succeeded()
    top = sorted(p.name for p in tmp_path.iterdir())
    assert top == [f"streaming-gates-{__import__('os').getuid()}"], top
    assert len(list((tmp_path / top[0]).iterdir())) == 3
    assert gate_for("s3://a/x").state().limit > 0  # another process finds the same state
