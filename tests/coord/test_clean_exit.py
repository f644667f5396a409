"""A clean run with DataLoader workers leaves no shared-memory file behind (a worker that
published a plan exits through multiprocessing's exit path, which skips atexit); a killed
run's leftovers are still reclaimed by the next start."""

from __future__ import annotations

import gc
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streaming import StreamingDataLoader, StreamingDataset
from tests.support.datasets import write_ids

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def shm(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setenv("STREAMING_SHM_DIR", str(folder))
    return folder


@pytest.mark.parametrize("workers", [1, 2])
def test_clean_run_with_workers_leaves_no_segment(tmp_path, shm, workers):
    root = write_ids(tmp_path / "data", 300)
    dataset = StreamingDataset(local=str(root), batch_size=10, shuffle=True)
    for _ in range(2):
        loader = StreamingDataLoader(dataset, batch_size=10, num_workers=workers)
        assert sum(len(batch["id"]) for batch in loader) == 300
        del loader
    dataset.close()
    del dataset
    gc.collect()
    assert sorted(os.listdir(shm)) == []


def test_killed_run_is_reclaimed_at_next_start(tmp_path, shm):
    root = write_ids(tmp_path / "data", 300)
    script = textwrap.dedent(f"""
        import os, signal
        from streaming import StreamingDataset
        ds = StreamingDataset(local={str(root)!r}, batch_size=10)
        next(iter(ds))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert os.listdir(shm)  # the killed run's files
    dataset = StreamingDataset(local=str(root), batch_size=10)
    assert len(list(dataset)) == 300
    dataset.close()
    del dataset
    gc.collect()
    assert sorted(os.listdir(shm)) == []


@pytest.mark.parametrize("how", ["loop, 0 workers", "loop, 2 workers", "dataset"])
def test_a_run_that_stops_mid_epoch_exits_quietly_and_leaves_no_segment(tmp_path, shm, how):
    """A script that takes a few batches from a cached (remote) dataset and exits, the
    iteration still open: its pass ends while the interpreter can still run it (no
    'Exception ignored' traceback from a half torn-down module), and nothing is left in
    shared memory."""
    remote = write_ids(tmp_path / "remote", 3000, size_limit=1 << 12, compression="zstd")
    workers = 2 if "2 workers" in how else 0
    take = ("it = iter(ds)\nfor _ in range(5): next(it)" if how == "dataset" else
            f"loader = StreamingDataLoader(ds, batch_size=10, num_workers={workers})\n"
            "it = iter(loader)\nfor _ in range(3): next(it)")
    script = textwrap.dedent("""
        from streaming import StreamingDataLoader, StreamingDataset
        ds = StreamingDataset(remote={remote!r}, local={local!r}, batch_size=10,
                              shuffle=True)
    """).format(remote=str(remote), local=str(tmp_path / "cache")) + take
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert sorted(os.listdir(shm)) == []


def test_the_exit_hook_closes_open_iterations_even_when_one_clean_up_fails(caplog, monkeypatch):
    """`close_open` runs the `finally` of every tracked generator still open, logs a clean-up
    that raises instead of stopping there, and leaves finished generators alone."""
    import weakref

    from streaming.util import exit_close
    from streaming.util.exit_close import close_open, closed_at_exit

    monkeypatch.setattr(exit_close, "_open", weakref.WeakSet())  # other tests' stay open

    ended: list[str] = []

    def iteration(name: str, fail: bool = False):
        try:
            yield 1
            yield 2
        finally:
            ended.append(name)
            if fail:
                raise RuntimeError(f"{name} could not end")

    failing = closed_at_exit(iteration("failing", fail=True))
    fine = closed_at_exit(iteration("fine"))
    finished = closed_at_exit(iteration("finished"))
    next(failing), next(fine)
    assert list(finished) == [1, 2] and ended == ["finished"]
    with caplog.at_level(logging.DEBUG, logger="streaming.util.exit_close"):
        close_open()
    assert sorted(ended) == ["failing", "fine", "finished"]
    assert "failing could not end" in caplog.text
    assert list(fine) == []  # closed: nothing more to yield
