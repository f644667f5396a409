"""Published files get the permissions the umask allows, like any file a program creates, so a
colleague or a service account can read a dataset (written, converted, merged or cached)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.dataset.local_dataset import LocalDataset
from streaming.format.compression import compress, decompress_file
from streaming.format.index import merge_index
from writers.convert import convert
from writers.mds import MDSWriter


@pytest.fixture(params=[0o022, 0o002])
def umask(request) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _modes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): stat.S_IMODE(p.stat().st_mode)
            for p in folder.rglob("*") if p.is_file()}


def _assert_files_follow(folder: Path, umask: int) -> None:
    modes = _modes(folder)
    assert modes
    wrong = {name: oct(mode) for name, mode in modes.items() if mode != 0o666 & ~umask}
    assert not wrong, f"expected {oct(0o666 & ~umask)}: {wrong}"


def _write(out: Path, compression: str | None = "zstd") -> None:
    with MDSWriter(columns={"id": "int"}, out=out, compression=compression) as writer:
        for i in range(10):
            writer.write({"id": i})


def test_writer_index_and_shards_follow_umask(tmp_path: Path, umask: int) -> None:
    _write(tmp_path / "ds")
    _assert_files_follow(tmp_path / "ds", umask)


def test_convert_output_follows_umask(tmp_path: Path, umask: int) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(f'{{"id": {i}}}\n' for i in range(20)))
    convert(src, tmp_path / "out", progress=False, workers=1)
    assert "index.json" in _modes(tmp_path / "out")
    _assert_files_follow(tmp_path / "out", umask)


def test_merged_index_follows_umask(tmp_path: Path, umask: int) -> None:
    _write(tmp_path / "all" / "part0")
    _write(tmp_path / "all" / "part1")
    merge_index(tmp_path / "all")
    _assert_files_follow(tmp_path / "all", umask)


def test_decompressed_cache_files_follow_umask(tmp_path: Path, umask: int) -> None:
    (tmp_path / "a.zstd").write_bytes(compress("zstd", b"x" * 1000))
    decompress_file(tmp_path / "a.zstd", tmp_path / "a", "zstd", durable=False)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o666 & ~umask


def test_local_dataset_decompressed_shards_follow_umask(tmp_path: Path, umask: int) -> None:
    _write(tmp_path / "ds")
    assert LocalDataset(tmp_path / "ds")[3]["id"] == 3
    assert (tmp_path / "ds" / "shard.00000.mds").exists()
    _assert_files_follow(tmp_path / "ds", umask)
