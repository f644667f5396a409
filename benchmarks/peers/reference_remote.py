"""One cold-cache epoch of mosaicml-streaming 0.13 from S3, for benchmarks/remote.py.

Runs inside .bench-venvs/reference (its import name `streaming` is ours too, hence the venv):

    .bench-venvs/reference/bin/python benchmarks/peers/reference_remote.py '{"remote": ...}'

It reads our MDS objects directly (the format is byte-compatible); boto3 finds the loopback
server through S3_ENDPOINT_URL. Prints JSON lines (see remote_epoch.py).
"""

from __future__ import annotations

import time

START = time.perf_counter()  # before any import but the standard library's, as for every system

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_import import reference_streaming_dataset  # noqa: E402
from remote_epoch import args, count_list, timed_epoch  # noqa: E402


def main() -> None:
    a = args()
    import torch

    StreamingDataset = reference_streaming_dataset()
    ds = StreamingDataset(remote=a["remote"], local=a["local"], shuffle=True,
                          batch_size=a["batch"], cache_limit=a["limit"])
    loader = torch.utils.data.DataLoader(ds, batch_size=a["batch"], num_workers=a["workers"],
                                         collate_fn=lambda b: b)
    timed_epoch(START, loader, count_list(a["column"]), a["local"])


if __name__ == "__main__":
    main()
