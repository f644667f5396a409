"""A DataLoader worker is settled once when it starts iterating: the objects it inherited are
frozen and its allocator keeps freed buffers. The training process's collector is never
touched; its allocator keeps freed buffers once it reads samples itself."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from streaming import StreamingDataset
from streaming.coord import worker_setup as worker
from streaming.coord.worker_setup import settle_reading_process, settle_worker
from streaming.util.malloc import IN_PROCESS, keep_buffers_in_heap, tuned

glibc_only = pytest.mark.skipif(not hasattr(os, "confstr") or sys.platform != "linux",
                                reason="glibc's mallopt")


def _worker_state(samples: list) -> tuple[int, bool, list[int]]:
    """Runs in the worker: frozen objects, whether its malloc was tuned, the ids."""
    return gc.get_freeze_count(), tuned(), [int(s["id"]) for s in samples]


def test_not_in_the_training_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(worker, "keep_buffers_in_heap", lambda tuning: calls.append(1))
    before = gc.get_freeze_count()
    assert settle_worker() is False
    assert gc.get_freeze_count() == before
    assert calls == []


def test_once_per_worker_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torch.utils.data.get_worker_info",
                        lambda: SimpleNamespace(id=0, num_workers=1))
    monkeypatch.setattr(worker, "_settled_pid", None)
    # not this process's malloc
    monkeypatch.setattr(worker, "keep_buffers_in_heap", lambda tuning: True)
    try:
        assert settle_worker() is True
        assert gc.get_freeze_count() > 0
        assert settle_worker() is False  # the same process again
    finally:
        gc.unfreeze()


def test_the_reading_process_tuning_is_for_the_training_process_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(worker, "keep_buffers_in_heap", lambda tuning: calls.append(tuning))
    monkeypatch.setattr(worker, "_reader_pid", None)
    monkeypatch.setattr("torch.utils.data.get_worker_info",
                        lambda: SimpleNamespace(id=0, num_workers=1))
    assert settle_reading_process() is False  # a worker has its own tuning
    monkeypatch.setattr("torch.utils.data.get_worker_info", lambda: None)
    settle_reading_process()
    assert settle_reading_process() is False  # once per process
    assert calls == [IN_PROCESS]


def test_freeze_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torch.utils.data.get_worker_info",
                        lambda: SimpleNamespace(id=0, num_workers=1))
    monkeypatch.setattr(worker, "_settled_pid", None)
    monkeypatch.setattr(worker, "keep_buffers_in_heap", lambda tuning: True)
    monkeypatch.setenv(worker.GC_FREEZE_ENV, "0")
    before = gc.get_freeze_count()
    try:
        assert settle_worker() is True
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()


def _in_fresh_python(code: str, *args: str, **env: str) -> str:
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=60, env={**os.environ, **env}, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    return run.stdout.strip()


_PROBE = """
from tests.util.helpers import own_mapping
from streaming.util.malloc import keep_buffers_in_heap
before = own_mapping()
done = keep_buffers_in_heap()
print(before, done, own_mapping())
"""


@glibc_only
def test_large_buffers_come_from_the_heap_once_tuned() -> None:
    # A fresh process maps an 8 MB buffer on its own (then unmaps it: fresh pages next time);
    # once tuned, the heap serves it and keeps the memory for the next one.
    assert _in_fresh_python(_PROBE) == "True True False"


@glibc_only
def test_the_users_malloc_settings_win() -> None:
    assert _in_fresh_python(_PROBE, MALLOC_TRIM_THRESHOLD_="1048576") == "True False True"
    # (any malloc tunable counts; this one leaves glibc's dynamic threshold on, so the second
    # 8 MB buffer comes from the heap either way: only "not tuned" is checked)
    tunables = "glibc.malloc.arena_max=2"
    assert _in_fresh_python(_PROBE, GLIBC_TUNABLES=tunables).split()[1] == "False"
    assert keep_buffers_in_heap.__module__ == "streaming.util.malloc"


_READS_ITSELF = """
import sys
from tests.util.helpers import own_mapping
from streaming import StreamingDataset
from streaming.util.malloc import tuned
ds = StreamingDataset(local=sys.argv[1], batch_size=10)
ds[3]  # a sample asked for by index is no read of the epoch
before = tuned()
count = sum(1 for _ in ds)
print(before, tuned(), own_mapping(24 << 20), count)
"""


@glibc_only
def test_the_training_process_reading_itself_keeps_freed_buffers(ids_dataset: Path) -> None:
    # No workers: the training process makes every value it hands out, so it is tuned as it
    # starts reading (a 24 MB buffer then comes from the heap, below the 32 MiB threshold).
    assert _in_fresh_python(_READS_ITSELF, str(ids_dataset)) == "False True False 300"
    # ... unless the user tuned glibc: then nothing is changed.
    assert _in_fresh_python(_READS_ITSELF, str(ids_dataset),
                            MALLOC_TRIM_THRESHOLD_="1048576").split()[:2] == ["False", "False"]


@glibc_only
def test_a_forked_worker_reads_settled(ids_dataset: Path, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    parent, parent_pid, tunings_here = gc.get_freeze_count(), os.getpid(), []
    real = worker.keep_buffers_in_heap

    def recorded(tuning):
        if os.getpid() == parent_pid:
            tunings_here.append(tuning)
        return real(tuning)

    monkeypatch.setattr(worker, "keep_buffers_in_heap", recorded)
    monkeypatch.setattr(worker, "_reader_pid", None)
    ds = StreamingDataset(local=str(ids_dataset), batch_size=10)
    loader = torch.utils.data.DataLoader(ds, batch_size=10, num_workers=1,
                                         multiprocessing_context="fork",
                                         collate_fn=_worker_state)
    counts, tunings, ids = [], [], []
    for count, was_tuned, batch in loader:
        counts.append(count)
        tunings.append(was_tuned)
        ids.extend(batch)
    assert sorted(ids) == list(range(300))
    # Everything the worker inherited (at least the torch modules we imported) is frozen.
    assert min(counts) > 10_000
    assert all(tunings)  # what the tuning does: test_large_buffers_come_from_the_heap_once_tuned
    # The parent's collector and allocator are untouched: it read no sample itself.
    assert gc.get_freeze_count() == parent
    assert tunings_here == []
