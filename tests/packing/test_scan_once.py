"""Lengths not recorded are scanned once per node: several real rank processes of one node
(launcher variables only) start a packed dataset over one S3 remote (moto on loopback) at
once; one of them downloads and scans the shards, the others read its result, and the
server's request log counts one GET per shard."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from streaming.format.index import read_index
from tests.cache._data import upload_dir
from tests.packing.datasets import write_tokens
from tests.support.processes import free_port

RANKS = 3
ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys
from streaming import StreamingDataset
ds = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], batch_size=4, packing=True,
                      packing_length=512)
print(int(ds.lengths.sum()), len(ds.lengths))
ds.close()
"""
LAUNCHER = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_PORT", "MASTER_ADDR",
            "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")


def test_one_rank_of_the_node_downloads_and_scans(s3_env, fault_proxy, tmp_path) -> None:
    src = tmp_path / "src"
    sizes = write_tokens(src, 200, lengths=None, compression="zstd", size_limit=1 << 13)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    proxy = fault_proxy(delay=0.2)  # a scan far longer than the ranks' start-up skew
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER}
    env["S3_ENDPOINT_URL"] = proxy.endpoint
    port = str(free_port())
    procs = []
    for rank in range(RANKS):
        launcher = {"RANK": str(rank), "WORLD_SIZE": str(RANKS), "LOCAL_RANK": str(rank),
                    "LOCAL_WORLD_SIZE": str(RANKS), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port}
        procs.append(subprocess.Popen(
            [sys.executable, "-c", CHILD, f"s3://{bucket}/ds", str(tmp_path / "cache")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**env, **launcher, "PYTHONPATH": str(ROOT)}))
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr[-2000:]
        assert stdout.split() == [str(int(np.sum(sizes))), str(len(sizes))]
    shards = [Path(name).name for name in read_index(src).zip_basenames]
    assert len(shards) > 3
    assert [proxy.count("GET", f"/{bucket}/ds/{name}") for name in shards] == [1] * len(shards)
