"""A shuffle fitted to the row groups a reading process keeps decoded: a Parquet corpus larger
than that room is shuffled over blocks whose row groups stay decoded, so each row group is
decoded about once per epoch instead of again for nearly every read (the default block spans
the whole corpus); a block the user set is kept, with a warning; `streaming plan` fits the
same plan."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.errors import ArgumentError
from streaming.format.parquet_decoded import DECODED_SETTING
from streaming.stream import Stream
from tests.parquet.helpers import write_files

pytestmark = pytest.mark.timeout(120)
ROWS = 4 * 300
COLUMNS = ["id", "tokens", "blob"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pq")
    write_files(folder, files=4, rows=300, row_group=20)  # 60 row groups
    return folder


def _groups(corpus: Path, tmp_path: Path) -> list[dict]:
    index = Stream(remote=str(corpus), local=tmp_path / "index", format="parquet",
                   columns=COLUMNS).index_file()
    return json.loads(index.read_bytes())["shards"]


def _epoch(corpus: Path, cache: Path, workers: int = 0, **options) -> tuple[list[int], dict]:
    ds = StreamingDataset(streams=[Stream(remote=str(corpus), local=cache, format="parquet",
                                          columns=COLUMNS)],
                          batch_size=10, shuffle=True, shuffle_seed=3, **options)
    try:
        loader = StreamingDataLoader(ds, batch_size=10, num_workers=workers,
                                     collate_fn=lambda rows: [int(r["id"]) for r in rows])
        ids = [i for batch in loader for i in batch]
        return ids, loader.metrics()
    finally:
        ds.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_each_row_group_is_decoded_about_once_when_the_corpus_outgrows_the_room(
        corpus: Path, tmp_path: Path, monkeypatch, caplog, workers: int) -> None:
    groups = _groups(corpus, tmp_path)
    assert len(groups) == 60 and all(g["decoded_bytes"] > 0 for g in groups)
    monkeypatch.setenv(DECODED_SETTING, str(12 * max(g["decoded_bytes"] for g in groups)))
    with caplog.at_level(logging.WARNING):
        ids, metrics = _epoch(corpus, tmp_path / "c", workers)
    assert sorted(ids) == list(range(ROWS))
    assert ids != sorted(ids)
    fetched = sum(g["raw_data"]["bytes"] for g in groups)
    # Each reading process decodes the row groups of the rows it reads: with workers, every
    # worker reads a part of each block. Unfitted, the block spans all 60 row groups and each
    # read decodes most of them again.
    assert fetched <= metrics["disk/bytes_read"] <= 1.25 * max(workers, 1) * fetched
    assert any(DECODED_SETTING in r.getMessage() and "shuffling over blocks of" in
               r.getMessage() for r in caplog.records)


def test_a_corpus_the_room_holds_keeps_the_whole_shuffle(corpus: Path, tmp_path: Path,
                                                         caplog) -> None:
    with caplog.at_level(logging.WARNING):
        ids, metrics = _epoch(corpus, tmp_path / "c")
    assert sorted(ids) == list(range(ROWS))
    assert not any(DECODED_SETTING in r.getMessage() for r in caplog.records)
    fetched = sum(g["raw_data"]["bytes"] for g in _groups(corpus, tmp_path))
    assert metrics["disk/bytes_read"] == fetched


def test_a_block_the_user_set_is_kept_with_a_warning(corpus: Path, tmp_path: Path,
                                                     monkeypatch, caplog) -> None:
    groups = _groups(corpus, tmp_path)
    monkeypatch.setenv(DECODED_SETTING, str(12 * max(g["decoded_bytes"] for g in groups)))
    with caplog.at_level(logging.WARNING):
        ds = StreamingDataset(streams=[Stream(remote=str(corpus), local=tmp_path / "c",
                                              format="parquet")],
                              batch_size=10, shuffle=True, shuffle_block_size=ROWS)
    ds.close()
    assert ds.config.shuffle_block_size == ROWS
    assert any(f"shuffle_block_size={ROWS} spans more row groups" in r.getMessage()
               for r in caplog.records)


def test_a_bad_setting_is_named(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(DECODED_SETTING, "lots")
    with pytest.raises(ArgumentError, match=f"{DECODED_SETTING}='lots'"):
        StreamingDataset(streams=[Stream(remote=str(corpus), local=tmp_path / "c",
                                         format="parquet")], batch_size=10, shuffle=True)


def test_resuming_with_another_room_that_changes_the_block_is_refused(
        corpus: Path, tmp_path: Path, monkeypatch) -> None:
    """The fitted block is part of the plan a state belongs to: a state saved under one room
    resumes under the same room, and is refused by name under one that plans other blocks."""
    from streaming.errors import StateMismatchError

    groups = _groups(corpus, tmp_path)
    monkeypatch.setenv(DECODED_SETTING, str(12 * max(g["decoded_bytes"] for g in groups)))

    def dataset() -> StreamingDataset:
        return StreamingDataset(streams=[Stream(remote=str(corpus), local=tmp_path / "c",
                                                format="parquet", columns=COLUMNS)],
                                batch_size=10, shuffle=True, shuffle_seed=3)

    first = dataset()
    state = first.state_after(100)
    first.close()
    again = dataset()
    again.load_state_dict(state)
    again.close()
    monkeypatch.delenv(DECODED_SETTING)
    other = dataset()
    try:
        with pytest.raises(StateMismatchError):
            other.load_state_dict(state)
    finally:
        other.close()


def test_the_setting_takes_a_size_with_a_unit(monkeypatch) -> None:
    from streaming.format.parquet_decoded import DECODED_BYTES, decoded_room

    assert decoded_room() == DECODED_BYTES
    monkeypatch.setenv(DECODED_SETTING, "2gb")
    assert decoded_room() == 2 << 30
    monkeypatch.setenv(DECODED_SETTING, "1073741824")
    assert decoded_room() == 1 << 30
    monkeypatch.setenv(DECODED_SETTING, "0")
    with pytest.raises(ArgumentError, match="must be a positive number of bytes"):
        decoded_room()
