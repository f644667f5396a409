"""Bad Parquet input fails with a typed error naming the file (and the row group), never a wrong
sample and never a hang: a corrupt footer, a file cut short, a corrupt row group, files whose
columns differ, an empty file, and a file replaced after its footer was read."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import StreamingDataset
from streaming.cache.prepare.parquet_footers import read_footer
from streaming.errors import ParquetFileError, ParquetSchemaError
from streaming.storage.backend import ListedObject
from streaming.storage.local_folder import LocalBackend
from streaming.storage.retry import RetryPolicy
from streaming.stream import Stream
from tests.parquet.helpers import assert_sample, table, write_files

pytestmark = pytest.mark.timeout(60)


def _dataset(folder: Path, cache: Path, **options) -> StreamingDataset:
    stream = Stream(remote=folder, local=cache, format="parquet", download_retry=0, **options)
    return StreamingDataset(streams=[stream], batch_size=4)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    write_files(tmp_path / "pq", files=2, rows=200, row_group=50)
    return tmp_path / "pq"


def test_a_corrupt_footer_is_named(corpus: Path, tmp_path: Path) -> None:
    path = corpus / "part-001.parquet"
    data = bytearray(path.read_bytes())
    length = int.from_bytes(data[-8:-4], "little")
    data[-8 - length:-8 - length + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    with pytest.raises(ParquetFileError, match=r"part-001\.parquet.*footer"):
        _dataset(corpus, tmp_path / "c")


def test_a_file_without_the_magic_is_named(corpus: Path, tmp_path: Path) -> None:
    path = corpus / "part-000.parquet"
    path.write_bytes(path.read_bytes()[:-1] + b"X")
    with pytest.raises(ParquetFileError, match=r"part-000\.parquet.*PAR1"):
        _dataset(corpus, tmp_path / "c")


def test_a_file_cut_short_is_named(corpus: Path, tmp_path: Path) -> None:
    path = corpus / "part-001.parquet"
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    with pytest.raises(ParquetFileError, match=r"part-001\.parquet"):
        _dataset(corpus, tmp_path / "c")


def test_a_corrupt_row_group_is_named_with_its_number(corpus: Path, tmp_path: Path) -> None:
    path = corpus / "part-001.parquet"
    meta = pq.read_metadata(path)
    group = meta.row_group(2)
    start = min(group.column(c).data_page_offset for c in range(group.num_columns))
    data = bytearray(path.read_bytes())
    data[start:start + 64] = b"\x00" * 64
    path.write_bytes(bytes(data))
    ds = _dataset(corpus, tmp_path / "c")
    for i in range(200):  # the untouched file reads
        assert_sample(ds[i])
    with pytest.raises(ParquetFileError, match=r"part-001\.parquet row group 2"):
        list(ds)


def test_columns_that_differ_between_files_name_both(corpus: Path, tmp_path: Path) -> None:
    pq.write_table(table(400, 50).drop_columns(["blob"]), corpus / "part-002.parquet")
    with pytest.raises(ParquetSchemaError,
                       match=r"'blob'.*part-000\.parquet.*missing in part-002\.parquet"):
        _dataset(corpus, tmp_path / "c")
    retyped = table(400, 50).set_column(0, "id", pa.array(range(400, 450), pa.int32()))
    pq.write_table(retyped, corpus / "part-002.parquet")
    with pytest.raises(ParquetSchemaError, match=r"'id' is int64 in part-000.*int32 in part-002"):
        _dataset(corpus, tmp_path / "c2")
    ds = _dataset(corpus, tmp_path / "c3", columns=["text", "tokens"])  # what they share
    assert len(ds) == 450


def test_an_empty_file_is_named(corpus: Path, tmp_path: Path) -> None:
    (corpus / "part-009.parquet").write_bytes(b"")
    with pytest.raises(ParquetFileError, match=r"part-009\.parquet.*empty"):
        _dataset(corpus, tmp_path / "c")


def test_a_file_of_no_rows_adds_no_shard(corpus: Path, tmp_path: Path) -> None:
    pq.write_table(table(0, 0), corpus / "part-009.parquet")
    assert len(_dataset(corpus, tmp_path / "c")) == 400


def test_no_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    with pytest.raises(ParquetFileError, match="no Parquet files"):
        _dataset(tmp_path / "none", tmp_path / "c")


@pytest.mark.parametrize("row", [250, 399])  # a middle row group; the last (read with the footer)
def test_a_file_replaced_mid_run_is_refused_by_name(corpus: Path, tmp_path: Path, row: int
                                                    ) -> None:
    ds = _dataset(corpus, tmp_path / "c")
    for i in range(0, 200, 50):
        assert_sample(ds[i])  # part-000's row groups are cached
    replacement = tmp_path / "new.parquet"
    pq.write_table(table(1000, 200), replacement, row_group_size=50)  # same shape, new rows
    shutil.copyfile(replacement, corpus / "part-001.parquet")
    with pytest.raises(ParquetFileError, match=r"part-001\.parquet row group \d.*changed"):
        ds[row]
    # the next start indexes the new file, and serves its rows
    again = _dataset(corpus, tmp_path / "c")
    assert sorted(assert_sample(s) for s in again) == [*range(200), *range(1000, 1200)]


def test_a_file_cut_short_mid_run_is_refused_by_name(corpus: Path, tmp_path: Path) -> None:
    ds = _dataset(corpus, tmp_path / "c")
    path = corpus / "part-000.parquet"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ParquetFileError, match=r"part-000\.parquet row group 1"):
        ds[60]


def test_a_file_replaced_under_a_projection_is_refused(corpus: Path, tmp_path: Path) -> None:
    """Two runs of columns (id, then meta) are fetched at once; the file's end is checked
    after both."""
    ds = _dataset(corpus, tmp_path / "c", columns=["id", "meta"])
    assert ds[0] == {"id": 0, "meta": {"a": 0, "b": "m0"}}
    replacement = tmp_path / "new.parquet"
    pq.write_table(table(1000, 200), replacement, row_group_size=50)
    shutil.copyfile(replacement, corpus / "part-001.parquet")
    with pytest.raises(ParquetFileError, match=r"part-001\.parquet row group 3.*changed"):
        ds[399]


def test_a_local_file_changed_in_place_with_the_same_footer_is_refused(tmp_path: Path) -> None:
    """No statistics, no compression, no checksums: a value changed in place leaves the size
    and the footer as they were; the file's modification time still tells."""
    folder = tmp_path / "pq"
    folder.mkdir()
    path = folder / "a.parquet"
    pq.write_table(table(0, 200).select(["id"]), path, row_group_size=50, compression="none",
                   write_statistics=False, use_dictionary=False)
    ds = _dataset(folder, tmp_path / "c")
    assert ds[0]["id"] == 0
    chunk = pq.read_metadata(path).row_group(1).column(0)
    end = chunk.data_page_offset + chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    data[end - 8:end] = (7777).to_bytes(8, "little")  # row 99's id
    before = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    with pytest.raises(ParquetFileError, match=r"a\.parquet row group 1.*modification time"):
        ds[99]
    assert _dataset(folder, tmp_path / "c")[99]["id"] == 7777  # a new start reads the new file


@pytest.mark.parametrize("delta", [-40, 0, 40])
def test_a_file_whose_listed_size_is_stale_is_read_at_its_size(tmp_path: Path, delta: int
                                                               ) -> None:
    """A file replaced between the listing and its footer's read (another size than listed):
    its footer is read again at the size the store gives now, never parsed from wrong bytes."""
    path = tmp_path / "a.parquet"
    pq.write_table(table(0, 120), path, row_group_size=50)
    size = path.stat().st_size
    found = read_footer(LocalBackend(), str(path), "a.parquet", None,
                        RetryPolicy(attempts=1), ListedObject(size + delta))
    assert found.size == size
    assert [group.rows for group in found.groups] == [50, 50, 20]


def test_a_corrupt_cached_footer_is_read_again_at_the_next_start(corpus: Path, tmp_path: Path
                                                                 ) -> None:
    """The copy of a footer kept in the cache folder is damaged between two runs: the next
    start reads that file's footer again from the file itself and serves every row."""
    assert sorted(assert_sample(s) for s in _dataset(corpus, tmp_path / "c")) == list(range(400))
    cached = tmp_path / "c" / "part-001.parquet.footer"
    good = cached.read_bytes()
    cached.write_bytes(good[:16] + b"not a footer" * 8)
    assert sorted(assert_sample(s) for s in _dataset(corpus, tmp_path / "c")) == list(range(400))
    assert cached.read_bytes() == good


@pytest.mark.parametrize("changed", [False, True])
def test_a_cached_footer_damaged_mid_run_is_read_again(corpus: Path, tmp_path: Path,
                                                       changed: bool) -> None:
    """The cached copy of a footer is damaged before its row groups are fetched: the footer is
    read again from the file and the rows served; if the file changed as well, the error
    names it."""
    ds = _dataset(corpus, tmp_path / "c")
    assert_sample(ds[0])
    cached = tmp_path / "c" / "part-001.parquet.footer"
    good = cached.read_bytes()
    cached.write_bytes(good[:16] + b"not a footer" * 8)
    if changed:
        pq.write_table(table(1000, 200), corpus / "part-001.parquet", row_group_size=40)
        with pytest.raises(ParquetFileError, match=r"part-001\.parquet: its footer changed"):
            ds[250]
    else:
        assert assert_sample(ds[250]) == 250
        assert cached.read_bytes() == good


def test_a_string_that_is_not_utf8_is_named_with_its_row_group(tmp_path: Path) -> None:
    """A string column's bytes become `str` as rows are read: a value that is not UTF-8 is a
    ParquetFileError naming the file and row group, in whichever row it is met."""
    folder = tmp_path / "pq"
    folder.mkdir()
    offsets = pa.py_buffer(np.array([0, 2, 4], np.int32))
    text = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"ok\xff\xfe")])
    pq.write_table(pa.table({"id": pa.array([0, 1], pa.int64()), "text": text}),
                   folder / "bad.parquet")
    ds = _dataset(folder, tmp_path / "c")
    assert ds[0]["text"] == "ok"
    with pytest.raises(ParquetFileError, match=r"bad\.parquet row group 0 .*not UTF-8"):
        ds[1]
    with pytest.raises(ParquetFileError, match=r"bad\.parquet row group 0 .*not UTF-8"):
        list(ds.iter_batches(2))
