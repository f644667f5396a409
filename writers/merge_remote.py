"""`merge_index` for a dataset at a URL (s3://, gs://, az://...): the sub-datasets' indexes are
read from the store, merged exactly as a local merge would, every shard they name is confirmed
present at its recorded size, and only then is the root index.json published (one upload)."""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from streaming.errors import IndexFileError, IndexNotFoundError, ShardCorruptError
from streaming.format.index import merge_index, read_index
from streaming.storage import backend_for, join, upload
from streaming.storage.retry import RETRY, RetryPolicy

INDEX = "index.json"


def merge_remote_index(out: str, parts: list[str] | None = None, *, retry: int = RETRY) -> str:
    """Write `out/index.json` joining the sub-datasets under the URL `out` (all `out/*/` in
    natural order when `parts` is None); returns the index URL."""
    out = os.fspath(out).rstrip("/")
    backend, root = backend_for(out)
    prefix = root.rstrip("/") + "/" if root.rstrip("/") else ""
    policy = RetryPolicy(attempts=retry + 1, timeout=120.0)
    if parts is None:
        listed = policy.run(f"list {out}", lambda deadline: backend.list(prefix))
        names = [key[len(prefix):-len(INDEX) - 1] for key in listed
                 if key.endswith("/" + INDEX) and key[len(prefix):].count("/") == 1]
    else:
        names = [_relative(out, os.fspath(part)) for part in parts]
    if not names:
        raise IndexNotFoundError(f"{out}: no sub-dataset index.json files to merge")
    with tempfile.TemporaryDirectory(prefix="mds-merge-") as tmp:
        for name in names:
            key = f"{prefix}{name}/{INDEX}"
            data = policy.run(join(out, name, INDEX), lambda deadline, key=key: backend.get(
                key, deadline=deadline))
            Path(tmp, name).mkdir(parents=True, exist_ok=True)
            Path(tmp, name, INDEX).write_bytes(data)
        merged = merge_index(tmp, None if parts is None else [Path(tmp, n) for n in names])
        _confirm_shards(out, read_index(merged).shards, policy)
        upload(merged, join(out, INDEX), retry=retry)
    return join(out, INDEX)


def _relative(out: str, part: str) -> str:
    part = part.rstrip("/").removesuffix("/" + INDEX)
    if not part.startswith(out + "/"):
        raise IndexFileError(f"{part}: sub-dataset is not inside {out}")
    return part[len(out) + 1:]


def _confirm_shards(out: str, shards: list[dict], policy: RetryPolicy) -> None:
    """Refuse to publish an index naming a shard file that is missing or of another size."""
    wanted = [(entry["basename"], int(entry["bytes"])) for shard in shards
              for entry in (shard.get("zip_data") or shard["raw_data"],)]

    def check(item: tuple[str, int]) -> None:
        url = join(out, item[0])
        backend, key = backend_for(url)
        size = policy.run(url, lambda deadline: backend.size(key))
        if size != item[1]:
            raise ShardCorruptError(f"{url}: {size} bytes, the sub-dataset index says {item[1]}")

    with ThreadPoolExecutor(16, thread_name_prefix="mds-merge") as pool:
        list(pool.map(check, wanted))
