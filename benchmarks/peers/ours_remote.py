"""One cold-cache epoch of this project's StreamingDataset from S3, for benchmarks/remote.py.

Runs with the project's venv, like the peers' scripts run with theirs; the clock starts before
any import but the standard library's, as in theirs, so every system's start-up counts alike:

    .venv/bin/python benchmarks/peers/ours_remote.py '{"remote": ...}'

Prints JSON lines (see remote_epoch.py).
"""

from __future__ import annotations

import time

START = time.perf_counter()

import os  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from remote_epoch import args, timed_epoch  # noqa: E402


def count_ours(column: str):
    """Counter for our default collate: tensors, `Ragged` columns, or lists of bytes."""
    from remote_epoch import nbytes

    def count(batch: dict) -> tuple[int, int]:
        col = batch[column]
        if hasattr(col, "values") and hasattr(col, "offsets"):
            size = nbytes(col.values)
        elif hasattr(col, "nbytes"):
            size = nbytes(col)
        else:
            size = sum(map(nbytes, col))
        return len(batch["id"]), size

    return count


def main() -> None:
    a = args()
    from streaming import StreamingDataLoader, StreamingDataset

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = StreamingDataset(remote=a["remote"], local=a["local"], shuffle=True,
                              batch_size=a["batch"], cache_limit=a["limit"],
                              shuffle_block_size=a.get("block"))
    notes = ["cache_limit not enforced by this build"
             for w in caught if "not enforced" in str(w.message)]
    loader = StreamingDataLoader(ds, batch_size=a["batch"], num_workers=a["workers"])
    marks: dict[str, float] = {}
    shards = a.get("shards")

    def batches():
        checked = 0.0
        for batch in loader:
            now = time.perf_counter()
            if shards and "all_shards_in" not in marks and now - checked > 0.02:
                checked = now  # complete shards only: temp files are hidden (.name.tmp)
                if sum(name.endswith(".mds") and not name.startswith(".")
                       for name in os.listdir(a["local"])) >= shards:
                    marks["all_shards_in"] = now - START
            yield batch
        stats = ds.cache_stats()  # node-wide; downloads beyond the shard count are re-fetches
        notes.append(f"{stats.downloads} downloads, {stats.evictions} evictions, "
                     f"{stats.wait_seconds:.1f} s waiting")

    timed_epoch(START, batches(), count_ours(a["column"]), a["local"], notes, marks)


if __name__ == "__main__":
    main()
