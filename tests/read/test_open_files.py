"""Open shard files are bounded: a dataset of many more shards than the process may open files
(`ulimit -n`) reads every sample, by iteration, batches, random access and LocalDataset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from writers.mds import MDSWriter

REPO = Path(__file__).resolve().parents[2]
SHARDS = 700
LIMIT = 256


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fds") / "data"
    with MDSWriter(columns={"id": "int", "tokens": "ndarray:int32"}, out=out,
                   size_limit=120) as writer:
        for i in range(SHARDS * 2):
            writer.write({"id": i, "tokens": np.full(i % 3 + 1, i, np.int32)})
    assert len(list(out.glob("shard.*.mds"))) >= SHARDS
    return out


def _run_limited(code: str) -> dict:
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, ({LIMIT}, {LIMIT}))
        import json
    """) + textwrap.dedent(code)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_iteration_and_random_access_within_the_open_file_limit(many_shards):
    result = _run_limited(f"""
        from streaming import StreamingDataLoader, StreamingDataset
        from streaming.dataset.local_dataset import LocalDataset
        ds = StreamingDataset(local={str(many_shards)!r}, batch_size=20, shuffle=True)
        ids = sorted(int(s["id"]) for s in ds)
        batched = sorted(int(i) for b in StreamingDataLoader(ds, batch_size=20)
                         for i in b["id"])
        workers = sorted(int(i) for b in StreamingDataLoader(ds, batch_size=20, num_workers=2)
                         for i in b["id"])
        local = LocalDataset({str(many_shards)!r})
        random = [int(ds[i]["id"]) for i in range(0, len(local), 3)]
        scanned = [int(local[i]["id"]) for i in range(len(local))]
        print(json.dumps({{"ids": ids, "batched": batched, "workers": workers,
                          "random": random, "local": scanned}}))
    """)
    every = list(range(SHARDS * 2))
    assert result["ids"] == every
    assert result["batched"] == every
    assert result["workers"] == every
    assert result["random"] == every[::3]
    assert result["local"] == every
