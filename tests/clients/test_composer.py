"""Composer's Trainer with StreamingDataLoader: checkpoints taken mid-epoch, on the epoch's last
batch and at `1ep`, each resumed by a new process, continue the uninterrupted run batch for batch
(one rank, and two ranks over gloo); the one-rank run also logs the loader metrics through
StreamingMetricsCallback.

Composer imports torchvision at start-up; these runs use the stand-in in tests/support/standins
(see tests/clients/helpers.py), since the index's torchvision wheel does not load beside CPU torch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.clients.helpers import child_env, require
from tests.support.processes import free_port
from writers import MDSWriter

SCRIPT = Path(__file__).with_name("composer_run.py")
SAMPLES = 96  # 24 batches of 4 per epoch on one rank, 12 per rank on two


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    require("composer")
    root = tmp_path_factory.mktemp("composer") / "data"
    with MDSWriter(columns={"id": "int", "x": "float32"}, out=str(root),
                   size_limit=1 << 9) as writer:
        for i in range(SAMPLES):
            writer.write({"id": i, "x": np.float32(i / SAMPLES)})
    return root


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def launch(argv: list[str], logs: Path, timeout: float, ranks: int = 1) -> None:
    """Run `python argv...` as `ranks` processes with torch.distributed's launcher variables,
    each in its own process group writing to `logs`/rank<R>.log. The first rank to fail ends
    the run with its log (its peers would otherwise wait for it in a collective until
    Composer's own timeout); all are killed at the shared deadline."""
    port = str(free_port())
    procs = []
    for rank in range(ranks):
        launcher = {} if ranks == 1 else dict(
            RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(ranks), NODE_RANK="0", MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port)
        env = child_env(STREAMING_STALL_REPORT_S="30", **launcher)  # a stuck worker shows
        with (logs / f"rank{rank}.log").open("w") as log:
            procs.append(subprocess.Popen([sys.executable, *argv], env=env, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
    deadline = time.monotonic() + timeout
    try:
        while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
            if any(proc.returncode not in (None, 0) for proc in procs):
                break
            time.sleep(0.1)
        codes = [proc.poll() for proc in procs]
    finally:
        stop(procs)
    failed = []
    for rank in sorted(range(ranks), key=lambda r: codes[r] in (None, 0)):  # failed ones first
        code = codes[rank] if codes[rank] is not None else f"nothing after {timeout}s"
        if code != 0:  # every failed rank's log: a hang shows in its peers' stacks too
            log = (logs / f"rank{rank}.log").read_text(errors="replace")
            stalls = [line for line in log.splitlines() if "stall" in line.lower()][:5]
            failed.append(f"rank {rank} exited {code}; stall reports: {stalls}\n{log[-5000:]}")
    assert not failed, f"{argv}\n" + "\n".join(failed)


def stop(procs: list[subprocess.Popen]) -> None:
    """Kill the process groups still running, after asking each of their processes (the
    DataLoader workers too) to print every thread's stack into the log (composer_run.py
    registers SIGUSR1 with faulthandler)."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        os.killpg(proc.pid, signal.SIGUSR1)
    if running:
        time.sleep(2.0)
    for proc in running:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run(data: Path, out: Path, ranks: int, load: list[str]) -> None:
    args = [str(data), str(out)] + [a for ckpt in load for a in ("--load", ckpt)]
    launch([str(SCRIPT), *args], out, timeout=130, ranks=ranks)


@pytest.fixture(scope="module")
def full_run(data, tmp_path_factory) -> Callable[[int], Path]:
    """`full_run(ranks)`: the folder of the uninterrupted run on `ranks` ranks (made once)."""
    made: dict[int, Path] = {}

    def get(ranks: int) -> Path:
        if ranks not in made:
            out = tmp_path_factory.mktemp(f"composer-{ranks}-ranks")
            run(data, out, ranks, [])
            made[ranks] = out
        return made[ranks]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 2])
def test_resumes_equal_the_uninterrupted_run(full_run, data, ranks) -> None:
    out = full_run(ranks)
    per_epoch = SAMPLES // 4 // ranks
    ckpts = {"ep0-ba5": 5, f"ep0-ba{per_epoch}": per_epoch, f"1ep/ep1-ba{per_epoch}": per_epoch}
    paths = [out / "ckpt" / f"{name}-rank0.pt" for name in ckpts]  # rank 0 saves for all
    assert all(p.is_file() for p in paths)
    run(data, out, ranks, [str(p) for p in paths])
    fulls = [rows(out / f"batches-rank{rank}.jsonl") for rank in range(ranks)]
    for epoch in range(2):  # every sample once per epoch over the ranks
        part = slice(epoch * per_epoch, (epoch + 1) * per_epoch)
        assert sorted(i for full in fulls for r in full[part] for i in r["ids"]) == list(
            range(SAMPLES))
    for rank, full in enumerate(fulls):
        assert len(full) == 2 * per_epoch
        for name, done in ckpts.items():
            resumed = rows(out / f"resumed-{Path(name).name}-rank{rank}.jsonl")
            assert resumed == full[done:], (name, rank)


@pytest.mark.slow
def test_composer_logs_loader_metrics(full_run) -> None:
    """StreamingMetricsCallback in the one-rank run logged through Composer's InMemoryLogger
    every 5 of its 48 batches (2 epochs of 24 batches of 4), counting samples across epochs."""
    logged = json.loads((full_run(1) / "metrics-rank0.json").read_text())
    assert logged == [20.0 * k for k in range(1, 10)]
