"""Stall reports: when the training loop has waited for its workers' next batch longer than
`stall_report_s`, the loader logs every live worker's stacks (real DataLoader workers, one of
them stuck in a function of this file), and the run goes on to the same batches; a loop busy
with its own work, or receiving batches, gets no report; the stacks files of ended workers are
removed; a process that is not our child is never signalled."""

from __future__ import annotations

import logging
import multiprocessing
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming import Stream, StreamingDataLoader, StreamingDataset
from streaming.coord import worker_stacks
from streaming.loader import stall_watch
from tests.support.datasets import write_ids

BATCH = 4
pytestmark = pytest.mark.skipif(worker_stacks.STACKS_SIGNAL is None,
                                reason="no real-time signal on this platform")


def stuck_reading_here(seconds: float) -> None:
    time.sleep(seconds)


class StallingDataset(StreamingDataset):
    """Worker 1 stops for `stall_s` seconds before its second batch."""

    stall_s = 0.0

    def iter_batches(self, *args, **kwargs) -> Iterator[dict]:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        for k, batch in enumerate(super().iter_batches(*args, **kwargs)):
            if info is not None and info.id == 1 and k == 1:
                stuck_reading_here(self.stall_s)
            yield batch


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_ids(tmp_path_factory.mktemp("stall") / "ids", 64, size_limit=400)


def loader(folder: Path, stall_s: float, after: float,
           context: str | None = None) -> StreamingDataLoader:
    ds = StallingDataset(streams=[Stream(local=str(folder))], batch_size=BATCH, shuffle=False)
    ds.stall_s = stall_s
    out = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2,
                              multiprocessing_context=context)
    out.first_batch_in_process = False
    out.stall_report_s = after
    return out


def ids(batches) -> list[list[int]]:
    return [batch["id"].tolist() for batch in batches]


def reports(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "has waited" in r.getMessage()]


def my_stacks_files() -> list[Path]:
    return list(worker_stacks.stacks_folder().glob(f"{os.getpid()}.*{worker_stacks.SUFFIX}"))


@pytest.mark.parametrize("context", [None, "forkserver"])  # forked, or a fork server's children
def test_a_stuck_worker_is_reported_with_its_stack_and_the_run_goes_on(folder, caplog, context):
    caplog.set_level(logging.WARNING, logger="streaming.loader")
    expected = ids(loader(folder, 0.0, 0.0))
    stalled = loader(folder, 4.0, 0.8, context)
    assert ids(stalled) == expected
    stuck = [r for r in reports(caplog) if "stuck_reading_here" in r]  # (a slow start may
    assert stuck, reports(caplog)  # be reported too, while the workers begin)
    assert "--- worker pid" in stuck[0]
    assert "from its 2 worker(s)" in stuck[0]
    assert not my_stacks_files()  # the ended workers' files are gone


def test_only_a_wait_inside_next_without_a_new_batch_is_reported():
    loop = stall_watch.Waiting()
    watch = stall_watch.StallWatch(loop, 1.0, 2)
    try:
        time.sleep(2.5)  # the loop busy with its own work (not inside next())
        assert watch.reports == 0
        loop.waiting = True
        for _ in range(25):  # inside next(), but batches keep coming
            loop.batches += 1
            time.sleep(0.1)
        assert watch.reports == 0
        time.sleep(3.0)  # inside next(), no batch: reported
        assert watch.reports >= 1
    finally:
        watch.stop()


def test_reports_can_be_turned_off(folder, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="streaming.loader")
    monkeypatch.setenv(stall_watch.STALL_ENV, "0")
    off = loader(folder, 2.0, stall_watch.after_from_env())
    assert off.stall_report_s == 0
    assert len(ids(off)) == 64 // BATCH
    assert not reports(caplog)
    monkeypatch.setenv(stall_watch.STALL_ENV, "soon")
    assert stall_watch.after_from_env() == stall_watch.DEFAULT_AFTER_S


def _armed_child(ready, stop) -> None:
    worker_stacks.arm_worker()
    ready.set()
    stop.wait(30)


def test_only_our_armed_children_are_signalled_and_files_of_gone_parents_are_swept():
    context = multiprocessing.get_context("fork")
    ready, stop = context.Event(), context.Event()
    child = context.Process(target=_armed_child, args=(ready, stop))
    child.start()
    try:
        assert ready.wait(30)
        folder = worker_stacks.stacks_folder()
        impostor = folder / f"{os.getpid()}.1{worker_stacks.SUFFIX}"  # pid 1: not our child
        impostor.write_bytes(b"")
        orphan = folder / f"999999999.{child.pid}{worker_stacks.SUFFIX}"  # its parent is gone
        orphan.write_bytes(b"")
        stacks = worker_stacks.worker_stacks(wait_s=1.0)
        assert [s.pid for s in stacks] == [child.pid]
        assert "_armed_child" in stacks[0].text
        impostor.unlink()
        worker_stacks._sweep(folder)
        assert not orphan.exists()
        ended = folder / f"{os.getppid()}.999999999{worker_stacks.SUFFIX}"  # a sibling gone
        ended.write_bytes(b"")
        worker_stacks._sweep(folder)
        assert not ended.exists()
    finally:
        stop.set()
        child.join(30)
    worker_stacks.forget_gone_workers()
    assert not my_stacks_files()


def test_a_folder_others_can_open_is_never_used(tmp_path, monkeypatch):
    """A planted file in a folder others can write could name a process to signal."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"streaming-stacks-{os.getuid()}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    (folder / f"{os.getpid()}.{os.getpid()}{worker_stacks.SUFFIX}").write_bytes(b"")
    with pytest.raises(OSError, match="not a private folder"):
        worker_stacks.stacks_folder()
    assert worker_stacks.worker_stacks(wait_s=0.0) == []
    worker_stacks.forget_gone_workers()
    folder.chmod(0o700)
    assert worker_stacks.stacks_folder() == folder
