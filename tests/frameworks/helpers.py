"""Helpers of the framework tests: run a framework script as a real process group with a hard
deadline, read the batches it wrote, and the torchdata StatefulDataLoader that the resume tests
build in the test and in the resuming process alike (tests/frameworks/torchdata_resume.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run_script(script: str, args: list[str], *, timeout: float, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """`python tests/frameworks/<script> args...` in its own session; on timeout the whole
    process group (launchers start children) is killed and the test fails with its output."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name(script)), *args],
                            cwd=REPO, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{script} {args} did not finish in {timeout}s:\n{out[-4000:]}"
                             ) from None
    if proc.returncode != 0:
        raise AssertionError(f"{script} {args} exited {proc.returncode}:\n{out[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def read_batches(path: Path) -> list[list[int]]:
    """The `ids` of every JSON line of `path`, in order."""
    return [json.loads(line)["ids"] for line in path.read_text().splitlines()]


def make_loader(data: str, workers: int, persistent: bool, batch_size: int,
                packing: bool = False) -> Any:
    """A torchdata StatefulDataLoader over a shuffled StreamingDataset of `data` (with
    `packing`, a PackedStreamingDataset yielding batches of 2 packs of 256 tokens)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from streaming import PackedStreamingDataset, StreamingDataset

    persistent = persistent and workers > 0
    if packing:
        dataset = PackedStreamingDataset(local=data, shuffle=True, packing_length=256,
                                         packs_per_batch=2)
        return StatefulDataLoader(dataset, batch_size=None, num_workers=workers,
                                  persistent_workers=persistent)
    dataset = StreamingDataset(local=data, shuffle=True, batch_size=batch_size)
    return StatefulDataLoader(dataset, batch_size=batch_size, num_workers=workers,
                              persistent_workers=persistent)


def batch_ids(batch: Any) -> list[int]:
    """The sample ids of a batch (of samples, or of packs)."""
    return (batch["sample_ids"] if "sample_ids" in batch else batch["id"]).tolist()
