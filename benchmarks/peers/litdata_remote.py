"""LitData's side of benchmarks/remote.py: convert a corpus to its chunks, or stream one epoch.

Runs inside .bench-venvs/litdata:

    .bench-venvs/litdata/bin/python benchmarks/peers/litdata_remote.py convert CORPUS OUT BYTES
    .bench-venvs/litdata/bin/python benchmarks/peers/litdata_remote.py epoch '{"remote": ...}'

`convert` writes chunks of about BYTES (the MDS shard size, so both sides fetch objects of the
same size), each compressed whole with zstd like an MDS shard, from the same samples as
litdata_convert.py. (LitData's default framed "batch" mode wrote blob chunks its own reader
refused: "indexed as compression_level='batch' but missing LDFZ01 magic".)

`epoch` streams them from S3; the loopback endpoint and credentials reach LitData's boto3
client through `storage_options`, and its obstore chunk fetcher takes the endpoint from that
client.
"""

from __future__ import annotations

import time

START = time.perf_counter()  # before any import but the standard library's, as for every system

import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from litdata_convert import make_sample  # noqa: E402
from remote_epoch import count_list, timed_epoch  # noqa: E402


def convert(corpus: str, out: Path, chunk_bytes: int) -> None:
    """Optimize every sample of `corpus` into `out` (skipped when a previous run finished)."""
    import litdata

    if (out / "done").exists():
        return
    shutil.rmtree(out, ignore_errors=True)
    n = len(np.load(Path(corpus) / "offsets.npy")) - 1
    litdata.optimize(fn=make_sample, inputs=[(corpus, i) for i in range(n)],
                     output_dir=str(out), chunk_bytes=chunk_bytes, compression="zstd",
                     compression_level="chunk", num_workers=2, mode="overwrite", verbose=False)
    (out / "done").write_text("{}")


def _plain(batch: list[dict]) -> list[dict]:
    """The batch as a list of samples, with memoryview values copied to bytes: LitData decodes
    a `bytes` column to a memoryview of its chunk, which a DataLoader worker cannot pickle (the
    worker's queue thread dies and the loader waits forever)."""
    return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in s.items()}
            for s in batch]


def epoch(a: dict) -> None:
    """One shuffled epoch with 2 workers from a cold cache folder."""
    import litdata
    from litdata.streaming import downloader

    # LitData GETs chunks with obstore, whose client refuses http:// URLs unless told; on real
    # (https) S3 this option changes nothing. Its other client options are kept as they are.
    downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True
    options = {"endpoint_url": a["endpoint"], "aws_access_key_id": a["key"],
               "aws_secret_access_key": a["secret"], "region_name": "us-east-1"}
    ds = litdata.StreamingDataset(a["remote"], cache_dir=a["local"], shuffle=True,
                                  max_cache_size=a["limit"], storage_options=options)
    loader = litdata.StreamingDataLoader(ds, batch_size=a["batch"], num_workers=a["workers"],
                                         collate_fn=_plain)
    timed_epoch(START, loader, count_list(a["column"]), a["local"])


def main() -> None:
    if sys.argv[1] == "convert":
        convert(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
    else:
        epoch(json.loads(sys.argv[2]))


if __name__ == "__main__":
    main()
