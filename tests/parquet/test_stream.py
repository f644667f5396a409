"""A Parquet stream read where it lies: a folder, a file:// URL, a glob and a list of files give
every row exactly once with every column type decoded as documented; a projection fetches only
its columns' chunks; an unrepresentable column is refused at construction, by name."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import StreamingDataset
from streaming.errors import ParquetFileError, ParquetSchemaError, PlanError
from streaming.format.parquet_decoded import decoded_bytes
from streaming.format.parquet_shard import ParquetShardReader
from streaming.stream import Stream
from tests.parquet.helpers import assert_sample, table, write_files


def _ids(ds: StreamingDataset) -> list[int]:
    return sorted(assert_sample(sample) for sample in ds)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    write_files(tmp_path / "pq", files=3, rows=300, row_group=64)
    return tmp_path / "pq"


@pytest.mark.parametrize("how", ["folder", "file_url", "glob", "list", "local_only"])
def test_every_row_once_with_every_type(corpus: Path, tmp_path: Path, how: str) -> None:
    remote = {"folder": str(corpus), "file_url": corpus.as_uri(),
              "glob": str(corpus / "part-00[02].parquet"),
              "list": [str(corpus / "part-000.parquet"), str(corpus / "part-002.parquet")],
              "local_only": None}[how]
    if how == "local_only":
        stream = Stream(local=corpus, format="parquet")
    else:
        stream = Stream(remote=remote, local=tmp_path / "cache", format="parquet")
    ds = StreamingDataset(streams=[stream], batch_size=8, shuffle=True, shuffle_seed=3)
    want = list(range(900)) if how in ("folder", "file_url", "local_only") else \
        list(range(300)) + list(range(600, 900))
    assert len(ds) == len(want)
    assert _ids(ds) == want
    assert assert_sample(ds[len(want) - 1]) == want[-1]
    assert ds.num_samples == len(want)
    assert not any(p.suffix == ".mds" for p in corpus.iterdir())  # nothing written beside them


def _served(corpus: Path, http_server, name: str) -> list[str]:
    """The corpus's files on the loopback HTTP server (under `name`), as a list of URLs: a
    remote whose row groups are fetched into the cache, unlike a folder's."""
    shutil.copytree(corpus, http_server.root / name)
    return [f"{http_server.endpoint}/{name}/{p.name}" for p in sorted(corpus.iterdir())]


def test_the_files_are_not_copied_whole(corpus: Path, tmp_path: Path, http_server) -> None:
    """Each cached row group is its column chunks' bytes, far less than its file."""
    remote = _served(corpus, http_server, f"whole-{tmp_path.name}")
    ds = StreamingDataset(streams=[Stream(remote=remote, local=tmp_path / "c", format="parquet")],
                          batch_size=8)
    _ids(ds)
    groups = sorted((tmp_path / "c").glob("*.rg*"))
    assert len(groups) == 3 * 5  # 300 rows in row groups of 64
    held = sum(p.stat().st_size for p in groups)
    whole = sum(p.stat().st_size for p in corpus.iterdir())
    assert held < whole
    assert all(p.stat().st_size < (corpus / "part-000.parquet").stat().st_size / 3 for p in groups)


def test_a_local_file_is_read_in_place(corpus: Path, tmp_path: Path) -> None:
    """A file on a filesystem is decoded where it lies: the cache folder keeps the index and
    the footers, and nothing per row group (no copy, no marker, no lock file)."""
    ds = StreamingDataset(streams=[Stream(remote=corpus, local=tmp_path / "c", format="parquet")],
                          batch_size=8, shuffle=True)
    assert _ids(ds) == list(range(900))
    assert ds.metrics()["disk/bytes_read"] > 0  # every row group decoded from its file
    kept = [p.name for p in (tmp_path / "c").iterdir()]
    assert not [name for name in kept if ".rg" in name or name.endswith(".prep.lock")], kept
    assert sorted(name for name in kept if name.endswith(".footer")) == [
        f"part-00{k}.parquet.footer" for k in range(3)]
    assert "in_place" in (tmp_path / "c" / "index.json").read_text()


def test_a_local_file_removed_mid_run_is_named(corpus: Path, tmp_path: Path) -> None:
    ds = StreamingDataset(streams=[Stream(remote=corpus, local=tmp_path / "c", format="parquet",
                                          download_retry=0)], batch_size=8)
    assert_sample(ds[0])
    (corpus / "part-001.parquet").unlink()
    with pytest.raises(ParquetFileError, match=r"part-001\.parquet row group \d.*gone"):
        ds[400]


def test_a_projection_fetches_only_its_columns(corpus: Path, tmp_path: Path,
                                               http_server) -> None:
    remote = _served(corpus, http_server, f"projected-{tmp_path.name}")
    full = StreamingDataset(streams=[Stream(remote=remote, local=tmp_path / "all",
                                            format="parquet")], batch_size=8)
    some = StreamingDataset(streams=[Stream(remote=remote, local=tmp_path / "ids",
                                            format="parquet", columns=["id", "tokens"])],
                            batch_size=8)
    samples = list(some)
    assert sorted(s["id"] for s in samples) == list(range(900))
    assert set(samples[0]) == {"id", "tokens"}
    list(full)
    fetched = sum(p.stat().st_size for p in (tmp_path / "ids").glob("*.rg*"))
    everything = sum(p.stat().st_size for p in (tmp_path / "all").glob("*.rg*"))
    assert fetched < everything * 0.8
    # the index (what the planner and `streaming plan` see) counts the projected bytes only
    assert int(np.sum(some.catalog.facts.raw_bytes)) == fetched


def test_the_index_is_cached_beside_the_row_groups(corpus: Path, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    StreamingDataset(streams=[Stream(remote=corpus, local=cache, format="parquet")],
                     batch_size=8)
    assert (cache / "index.json").is_file()
    assert sorted(p.name for p in cache.glob("*.footer")) == [
        f"part-00{k}.parquet.footer" for k in range(3)]


def test_an_unrepresentable_column_is_named_at_construction(tmp_path: Path) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "when": pa.array([1, 2], pa.timestamp("ms"))}),
                   folder / "a.parquet")
    with pytest.raises(ParquetSchemaError, match=r"a\.parquet.*'when'.*timestamp"):
        StreamingDataset(streams=[Stream(remote=folder, local=tmp_path / "c",
                                         format="parquet")], batch_size=2)
    ds = StreamingDataset(streams=[Stream(remote=folder, local=tmp_path / "c2",
                                          format="parquet", columns=["id"])], batch_size=2)
    assert sorted(s["id"] for s in ds) == [1, 2]


def test_a_missing_projected_column_is_named(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(ParquetSchemaError, match="'nope'"):
        StreamingDataset(streams=[Stream(remote=corpus, local=tmp_path / "c", format="parquet",
                                         columns=["id", "nope"])], batch_size=2)


def test_stream_arguments_are_checked() -> None:
    with pytest.raises(PlanError, match="format"):
        Stream(local="x", format="orc")
    with pytest.raises(PlanError, match="columns"):
        Stream(local="x", columns=["a"])
    with pytest.raises(PlanError, match="split"):
        Stream(remote="s3://b/x", format="parquet", split="train")


def test_large_row_groups_are_warned_about_once(corpus: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from streaming.cache.prepare import parquet_footers

    monkeypatch.setattr(parquet_footers, "LARGE_GROUP", 1000)
    with pytest.warns(UserWarning, match=r"part-000\.parquet row group 0 .* 14 more") as caught:
        ds = StreamingDataset(streams=[Stream(remote=corpus, local=tmp_path / "c",
                                              format="parquet")], batch_size=8)
    assert len([w for w in caught if "row group" in str(w.message)]) == 1
    assert len(ds) == 900


def test_validate_hash_is_refused_on_a_parquet_stream() -> None:
    with pytest.raises(PlanError, match="validate_hash"):
        Stream(remote="s3://b/x", format="parquet", validate_hash="xxh64")


def test_samples_do_not_share_mutable_values(corpus: Path, tmp_path: Path) -> None:
    """A training loop that changes a sample changes no later read of the same row."""
    ds = StreamingDataset(streams=[Stream(remote=corpus, local=tmp_path / "c",
                                          format="parquet")], batch_size=8)
    first = ds[5]
    first["meta"]["a"] = -1
    with pytest.raises(ValueError, match="read-only"):
        first["tokens"][0] = -1
    assert_sample(ds[5])


@pytest.mark.parametrize("views", [False, True])
def test_batches_for_the_worker_transport_view_the_decoded_blobs(corpus: Path, tmp_path: Path,
                                                                 views: bool) -> None:
    """The worker transport asks for views (it copies each batch into its ring at once): binary
    values are then read-only memoryviews of the decoded row group, never bytes made only to be
    copied again; everyone else gets bytes. Either way, every row's value is its own."""
    ds = StreamingDataset(streams=[Stream(remote=corpus, local=tmp_path / "c",
                                          format="parquet")],
                          batch_size=16, shuffle=True, shuffle_seed=3)
    seen = []
    for batch in ds.iter_batches(16, views=views):
        for i, blob, text in zip(batch["id"], batch["blob"], batch["text"]):
            assert type(blob) is (memoryview if views else bytes)
            assert type(text) is str  # text is always made: a view would be its UTF-8 bytes
            assert bytes(blob) == bytes([int(i) % 256]) * (int(i) % 5)
            if views:
                assert blob.readonly
            seen.append(int(i))
    assert sorted(seen) == list(range(900))


def test_a_chunks_row_groups_are_decoded_at_once(corpus: Path, tmp_path: Path,
                                                 monkeypatch) -> None:
    """A shuffled chunk spans many row groups: they are decoded on several threads at once
    (the decoder releases the GIL), not one after another in the reading thread."""
    active, most, lock = [0], [0], threading.Lock()
    decode = ParquetShardReader._decode

    def watched(reader: ParquetShardReader):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            time.sleep(0.1)
            return decode(reader)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(ParquetShardReader, "_decode", watched)
    ds = StreamingDataset(streams=[Stream(remote=corpus, local=tmp_path / "c", format="parquet")],
                          batch_size=8, shuffle=True, shuffle_seed=5)
    assert sorted(int(i) for batch in ds.iter_batches(8) for i in batch["id"]) \
        == list(range(900))
    assert most[0] >= 2


def test_a_closed_dataset_keeps_none_of_its_row_groups_decoded(tmp_path: Path) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(table(0, 200), folder / "a.parquet", row_group_size=50)
    cache = tmp_path / "c"
    ds = StreamingDataset(streams=[Stream(remote=str(folder), local=cache, format="parquet")],
                          batch_size=10)
    assert [int(ds[i]["id"]) for i in (0, 60, 199)] == [0, 60, 199]
    assert decoded_bytes(cache) > 0
    ds.close()
    assert decoded_bytes(cache) == 0
