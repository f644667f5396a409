"""One fetch of a remote's index.json per node and job run, not one per rank.

The node's ranks open their datasets in the same order (SPMD). The k-th time a process of one
job run (the launcher's variables, see `coord.names.job_identity`) opens a cache folder, it
asks for the folder's k-th fetch: the first rank to get the folder's origin lock fetches the
index and records that it did (`.streaming-index-fetch.json`, beside the origin record); the
ranks after it, waiting on the same lock with its deadline, find the record and read the
fetched index.json instead of asking the remote again. A new job run, a later open in the same
process, or a process without a launcher fetches again, so a changed remote is seen at the next
start.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from streaming.coord.names import job_identity
from streaming.util.atomic import staged_file
from streaming.util.confine import read_regular
from streaming.util.fork_safe_lock import ForkSafeLock

FETCH_FILE = ".streaming-index-fetch.json"

_opened: Counter[str] = Counter()
_opened_lock = ForkSafeLock()


@dataclass(frozen=True)
class FetchTurn:
    """This process's turn at a folder's index: the job run and how many times the process
    has opened the folder (this open included).

    Args:
        job: a digest of the job run's identity on this node.
        ordinal: the open's number in this process, from 1.
    """

    job: str
    ordinal: int

    @classmethod
    def take(cls, folder: Path) -> FetchTurn | None:
        """The turn of this open of `folder`, or None without a launcher (always fetch)."""
        job = job_identity()
        if job is None:
            return None
        with _opened_lock:
            _opened[str(folder)] += 1
            ordinal = _opened[str(folder)]
        return cls(hashlib.blake2b(job.encode(), digest_size=12).hexdigest(), ordinal)

    def fetched(self, folder: Path, index_digest: str | None) -> bool:
        """Whether a rank of this job already fetched this turn's index (or a later one) into
        `folder`, and that index is the one there now (`index_digest`, the origin record's)."""
        try:
            record = json.loads(read_regular(folder / FETCH_FILE))
            size = (folder / "index.json").stat().st_size
        except (OSError, ValueError):
            return False
        return (isinstance(record, dict) and record.get("job") == self.job
                and isinstance(record.get("ordinal"), int) and record["ordinal"] >= self.ordinal
                and index_digest is not None and record.get("index") == index_digest
                and record.get("size") == size)

    def record(self, folder: Path, index_digest: str) -> None:
        """Note that this turn's index (digest `index_digest`) is now in `folder`."""
        size = (folder / "index.json").stat().st_size
        with staged_file(folder / FETCH_FILE) as tmp:
            tmp.write_text(json.dumps({"job": self.job, "ordinal": self.ordinal,
                                       "index": index_digest, "size": size}))
