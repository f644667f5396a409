"""A Parquet stream on every object store (S3 on moto, GCS emulator, Azurite, HTTP), all on
loopback: the footers are read with ranged GETs, every row is served once and exactly, a
projection fetches fewer bytes, and a file replaced on the store mid-run is refused by name."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.errors import ParquetFileError
from streaming.stream import Stream
from tests.parquet.helpers import assert_sample, table, write_files

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
FILES, ROWS = 3, 200


@pytest.fixture(scope="session")
def local_files(tmp_path_factory) -> list[Path]:
    return write_files(tmp_path_factory.mktemp("pq-src"), files=FILES, rows=ROWS, row_group=50)


@pytest.fixture
def published(store_env, local_files) -> tuple[str, object]:
    """A fresh bucket holding the files under `corpus/`; its space and the store."""
    space = store_env.space()
    for path in local_files:
        store_env.put(space, f"corpus/{path.name}", path.read_bytes())
    return space, store_env


def _remote(store, space: str, local_files: list[Path]) -> str | list[str]:
    if store.kind == "http":  # plain HTTP cannot list a folder: the files are named
        return [store.url(space, f"corpus/{p.name}") for p in local_files]
    return store.url(space, "corpus")


def test_every_row_once_from_the_store(published, local_files, tmp_path: Path) -> None:
    space, store = published
    stream = Stream(remote=_remote(store, space, local_files), local=tmp_path / "c",
                    format="parquet")
    ds = StreamingDataset(streams=[stream], shuffle=True, batch_size=8)
    assert sorted(assert_sample(s) for s in ds) == list(range(FILES * ROWS))
    whole = sum(p.stat().st_size for p in local_files)
    assert sum(p.stat().st_size for p in (tmp_path / "c").glob("*.rg*")) < whole


def test_two_workers_with_a_projection(published, local_files, tmp_path: Path) -> None:
    space, store = published
    stream = Stream(remote=_remote(store, space, local_files), local=tmp_path / "c",
                    format="parquet", columns=["id", "tokens"])
    ds = StreamingDataset(streams=[stream], shuffle=True, batch_size=8)
    loader = StreamingDataLoader(ds, batch_size=8, num_workers=2)
    ids = [i for batch in loader for i in batch["id"].tolist()]
    assert sorted(ids) == list(range(FILES * ROWS))


def test_a_file_replaced_on_the_store_is_refused(published, local_files, tmp_path: Path
                                                 ) -> None:
    space, store = published
    stream = Stream(remote=_remote(store, space, local_files), local=tmp_path / "c",
                    format="parquet", download_retry=0)
    ds = StreamingDataset(streams=[stream], batch_size=8)
    assert_sample(ds[0])
    other = tmp_path / "other.parquet"
    pq.write_table(table(5000, ROWS), other, row_group_size=50)
    store.put(space, f"corpus/{local_files[1].name}", other.read_bytes())
    with pytest.raises(ParquetFileError, match=rf"{local_files[1].name} row group 0.*changed"):
        ds[ROWS]


def test_a_glob_at_the_bucket_root(store_env, local_files, tmp_path: Path) -> None:
    if store_env.kind == "http":
        pytest.skip("plain HTTP cannot list")
    space = store_env.space()
    for path in local_files:
        store_env.put(space, path.name, path.read_bytes())
    store_env.put(space, "notes.txt", b"not parquet")
    stream = Stream(remote=store_env.url(space, "part-00[12].parquet"), local=tmp_path / "c",
                    format="parquet", columns=["id"])
    ds = StreamingDataset(streams=[stream], batch_size=8)
    assert sorted(int(s["id"]) for s in ds) == list(range(ROWS, FILES * ROWS))
