"""DataLoader workers of a training process killed with SIGKILL stop within about a second, even
while they wait for a shard download that would take a minute."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from streaming.coord.proc import ProcessId
from tests.support.datasets import write_ids

REPO = Path(__file__).resolve().parents[2]
TRAIN = textwrap.dedent("""
    import os, signal, sys, time
    from torch.utils.data import DataLoader
    from streaming import StreamingDataset
    from streaming.stream import Stream

    class Slow(Stream):
        def fetch(self, basename, dest, **kwargs):
            time.sleep(60)  # a download that takes a minute
            return super().fetch(basename, dest, **kwargs)

    remote, local, pids = sys.argv[1:4]

    def started(_):
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\\n")

    ds = StreamingDataset(streams=[Slow(remote=remote, local=local)])
    it = iter(DataLoader(ds, batch_size=None, num_workers=2, worker_init_fn=started))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if os.path.exists(pids) and len(open(pids).read().split()) == 2:
            break
        time.sleep(0.05)
    time.sleep(1.0)  # both workers are inside __iter__, waiting for their first shard
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_workers_of_a_killed_training_process_stop_within_a_second(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "remote", 60)
    script, pids = tmp_path / "train.py", tmp_path / "pids"
    script.write_text(TRAIN)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = tmp_path / "log"
    with open(log, "wb") as out:  # no pipes: the workers would hold them open
        proc = subprocess.Popen([sys.executable, str(script), str(remote),
                                 str(tmp_path / "cache"), str(pids)], env=env,
                                stdout=subprocess.DEVNULL, stderr=out)
        assert proc.wait(timeout=120) == -9, log.read_text()
    workers = [ProcessId(int(p)) for p in pids.read_text().split()]
    assert len(workers) == 2
    died = time.monotonic()
    try:
        while any(w.alive() for w in workers) and time.monotonic() - died < 10:
            time.sleep(0.05)
        waited = time.monotonic() - died
        assert not any(w.alive() for w in workers), "orphaned workers still running"
        assert waited < 2.0, waited  # within CHECK_EVERY, plus the time to exit
    finally:
        for w in workers:
            if w.alive():
                os.kill(w.pid, 9)
