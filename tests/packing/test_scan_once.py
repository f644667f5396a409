"""Lengths not recorded are scanned once per node: several real rank processes of one node
(launcher variables only) start a packed dataset over one S3 remote (moto on loopback) at
once; one of them downloads and scans the shards, the others read its result, and the
server's request log counts one GET per shard."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from streaming.format.index import read_index
from tests.cache._data import upload_dir
from tests.packing.datasets import write_tokens
from tests.support.node_ranks import run_node_ranks

RANKS = 3
CHILD = """
import sys
from streaming import StreamingDataset
ds = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], batch_size=4, packing=True,
                      packing_length=512)
print(int(ds.lengths.sum()), len(ds.lengths))
ds.close()
"""


def test_one_rank_of_the_node_downloads_and_scans(s3_env, fault_proxy, tmp_path) -> None:
    src = tmp_path / "src"
    sizes = write_tokens(src, 200, lengths=None, compression="zstd", size_limit=1 << 13)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    proxy = fault_proxy(delay=0.2)  # a scan far longer than the ranks' start-up skew
    env = {**os.environ, "S3_ENDPOINT_URL": proxy.endpoint}
    out = run_node_ranks(["-c", CHILD, f"s3://{bucket}/ds", str(tmp_path / "cache")], RANKS, env)
    assert out == [f"{int(np.sum(sizes))} {len(sizes)}"] * RANKS
    shards = [Path(name).name for name in read_index(src).zip_basenames]
    assert len(shards) > 3
    assert [proxy.count("GET", f"/{bucket}/ds/{name}") for name in shards] == [1] * len(shards)
