"""A training script that exits in the middle of an epoch through DataLoader workers (a run
stopped after some steps, a notebook closed): it exits quietly, and what shared memory is left
(segments of workers that multiprocessing terminates at exit) is stale, so the next start (or
`clean_stale_shared_memory`) removes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from streaming.coord import clean_stale_shared_memory
from tests.support.datasets import write_ids

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from streaming import StreamingDataLoader, StreamingDataset
ds = StreamingDataset(local=sys.argv[1], batch_size=8, shuffle=True)
batches = iter(StreamingDataLoader(ds, batch_size=8, num_workers=2))
first = next(batches)
print(len(first["id"]))
"""


def test_exit_with_a_loader_mid_epoch_is_quiet_and_leaves_no_live_segment(tmp_path: Path) -> None:
    data = write_ids(tmp_path / "ds", 400)
    shm = tmp_path / "shm"
    shm.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "STREAMING_SHM_DIR": str(shm)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(data)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8"]
    assert "Exception ignored" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    clean_stale_shared_memory(shm)
    assert sorted(p.name for p in shm.iterdir()) == []
