"""Issue 48 items 4-7: the work a remote can cause is bounded by what its index declares.
A zstd bomb writes at most the raw size the index declares; a body longer than declared
stops at its first excess read; an index.json larger than the cap is refused as it arrives;
a trickling server cannot outlast `download_timeout`; an entry claiming more samples than
its file can hold is named before anything is allocated for it. Bombs are scaled down
(256 MiB of zeros, some 8 KiB compressed) but prove the cap: the bytes this process writes
are counted by the kernel (/proc/self/io `wchar`)."""

from __future__ import annotations

import json
import os
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest
import zstandard

from streaming.cache.prepare import zstd_unpack as unpack
from streaming.errors import (
    DecompressionError,
    DownloadTimeoutError,
    IndexFileError,
    IndexJSONError,
    ObjectTooLargeError,
)
from streaming.format import compression
from streaming.format.compression import ZstdStream, decompress_file
from streaming.format.index import parse_index, read_index
from tests.security.conftest import Tree, clean_dataset, edit_index, read_epoch
from tests.support.hostile_http import HostileHTTPServer
from tests.support.s3server import FAKE_CREDENTIALS

BOMB = 256 << 20
MiB = 1 << 20


def bomb(sized: bool, size: int = BOMB) -> bytes:
    """`size` zero bytes as one zstd frame, its content size recorded (`sized`) or not."""
    enc = zstandard.ZstdCompressor(level=3).compressobj(size=size if sized else -1)
    block = bytes(MiB)
    return b"".join(enc.compress(block[:min(MiB, size - at)])
                    for at in range(0, size, MiB)) + enc.flush()


def written() -> int:
    """Bytes this process has passed to write() so far (the kernel's count)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


def _plant_bomb(source: Path, sized: bool) -> int:
    """Shard 0's zip becomes a bomb; returns the raw size its index declares."""
    document = json.loads((source / "index.json").read_text())
    entry = document["shards"][0]
    body = bomb(sized)
    (source / entry["zip_data"]["basename"]).write_bytes(body)
    entry["zip_data"]["bytes"] = len(body)
    entry["zip_data"]["hashes"] = {}
    (source / "index.json").write_text(json.dumps(document))
    return int(entry["raw_data"]["bytes"])


@pytest.mark.parametrize("sized", [True, False], ids=["size-recorded", "size-unknown"])
def test_a_zstd_bomb_writes_at_most_the_declared_size(tree: Tree, publish, sized: bool):
    source = clean_dataset(tree.root / "source")
    _plant_bomb(source, sized)
    remote = publish(source)
    before, start = tree.before(), written()
    with pytest.raises(DecompressionError, match="declare"):
        read_epoch(remote, tree.local)
    assert written() - start < 2 * MiB  # not the bomb's 256 MiB
    tree.assert_untouched(before)


@pytest.mark.parametrize("sized", [True, False], ids=["size-recorded", "size-unknown"])
def test_every_decoder_stops_at_the_declared_size(tmp_path: Path, monkeypatch, sized: bool):
    declared = 16 << 10
    src = tmp_path / "bomb.zstd"
    src.write_bytes(bomb(sized))
    counts: list[int] = []

    def counting(out, data) -> int:
        counts.append(len(data))
        return out.write(data)

    monkeypatch.setattr(compression, "write_sliced", counting)
    monkeypatch.setattr(unpack, "write_sliced", counting)
    for decode in (lambda: decompress_file(src, tmp_path / "a", "zstd", expected_size=declared),
                   lambda: unpack.unpack_zstd(src, tmp_path / "b", declared)):
        counts.clear()
        with pytest.raises(DecompressionError, match="declare"):
            decode()
        assert sum(counts) <= declared
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    tracemalloc.start()
    try:
        stream, out = ZstdStream(limit=declared), 0
        with pytest.raises(DecompressionError, match="declare"):
            for at in range(0, src.stat().st_size, MiB):
                out += len(stream.feed(src.read_bytes()[at:at + MiB]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out <= declared and peak < 40 * MiB  # not the bomb's 256 MiB in memory


def test_a_body_longer_than_declared_stops_at_its_first_excess_read(tree: Tree, publish):
    source = clean_dataset(tree.root / "source", compression=None)
    (source / "shard.00000.mds").write_bytes(bytes(32 * MiB))
    remote = publish(source)
    before, start = tree.before(), written()
    with pytest.raises(ObjectTooLargeError, match="sent more than"):
        read_epoch(remote, tree.local)
    assert written() - start < 3 * MiB
    tree.assert_untouched(before)


def test_an_index_larger_than_the_cap_is_refused_as_it_arrives(tree: Tree, publish, monkeypatch):
    source = clean_dataset(tree.root / "source")
    edit_index(source, lambda document: document.update(pad="x" * (8 * MiB)))
    remote = publish(source)
    monkeypatch.setenv("STREAMING_MAX_INDEX_BYTES", str(MiB))
    before, start = tree.before(), written()
    with pytest.raises(IndexFileError, match="STREAMING_MAX_INDEX_BYTES"):
        read_epoch(remote, tree.local)
    assert written() - start < 3 * MiB
    tree.assert_untouched(before)
    monkeypatch.setenv("STREAMING_MAX_INDEX_BYTES", str(16 * MiB))  # the setting raises it
    shutil.rmtree(tree.local, ignore_errors=True)
    assert len(read_epoch(remote, tree.local)) == 40


def test_a_flooding_server_is_stopped_at_the_cap(tree: Tree, monkeypatch):
    source = clean_dataset(tree.root / "source" / "ds")
    monkeypatch.setenv("STREAMING_MAX_INDEX_BYTES", str(MiB))
    with HostileHTTPServer(source.parent) as server:
        server.attacks["ds/index.json"] = "flood"
        start = written()
        with pytest.raises(IndexFileError, match="STREAMING_MAX_INDEX_BYTES"):
            read_epoch(f"{server.endpoint}/ds", tree.local)
        assert written() - start < 3 * MiB
        monkeypatch.delenv("STREAMING_MAX_INDEX_BYTES")
        server.attacks = {"ds/shard.00001.mds.zstd": "flood"}
        start = written()
        with pytest.raises(ObjectTooLargeError):
            read_epoch(f"{server.endpoint}/ds", tree.local)
        assert written() - start < 3 * MiB


@pytest.mark.parametrize("what", ["index.json", "shard.00000.mds.zstd", "shard.00001.mds"])
@pytest.mark.parametrize("kind", ["http", "s3"])
def test_a_trickling_server_cannot_outlast_download_timeout(tree: Tree, monkeypatch, what: str,
                                                            kind: str):
    """Over HTTP, and over S3 (the server poses as an S3 endpoint: it serves bucket/key)."""
    source = clean_dataset(tree.root / "source" / "ds",
                           compression=None if what.endswith(".mds") else "zstd")
    with HostileHTTPServer(source.parent.parent, pace=0.1) as server:
        server.attacks[f"source/ds/{what}"] = "trickle"
        remote = f"{server.endpoint}/source/ds"
        if kind == "s3":
            for key, value in FAKE_CREDENTIALS.items():
                monkeypatch.setenv(key, value)
            monkeypatch.setenv("S3_ENDPOINT_URL", server.endpoint)
            monkeypatch.setenv("NO_PROXY", "127.0.0.1")
            remote = "s3://source/ds"
        began = time.monotonic()
        with pytest.raises(DownloadTimeoutError):
            read_epoch(remote, tree.local, download_timeout=1.5, download_retry=1)
        took = time.monotonic() - began
    assert took < 12.0, f"{took:.1f} s for two attempts of at most 1.5 s (and a backoff)"


def test_a_text_shard_claiming_more_rows_than_bytes_is_named(reference_text_index: dict):
    reference_text_index["shards"][0]["samples"] = 10 ** 12
    with pytest.raises(IndexFileError, match=r"shard 0 .*samples"):
        parse_index(json.dumps(reference_text_index), source="hostile/index.json")


def test_an_mds_shard_claiming_more_samples_than_its_file_holds_is_named(tmp_path: Path):
    source = clean_dataset(tmp_path / "ds")
    edit_index(source, lambda d: d["shards"][1].update(samples=1_073_741_821))
    with pytest.raises(IndexFileError, match=r"shard 1"):
        read_index(source)


def test_a_deeply_nested_index_is_a_typed_error(tmp_path: Path):
    (tmp_path / "index.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(IndexJSONError, match="nested"):
        read_index(tmp_path)


@pytest.fixture
def reference_text_index() -> dict:
    root = Path(__file__).parents[1] / "fixtures" / "reference-formats" / "json_one_shard"
    return json.loads((root / "index.json").read_text())


def test_a_file_that_is_also_a_folder_is_named(tmp_path: Path):
    source = clean_dataset(tmp_path / "ds", compression=None)

    def nest(document: dict) -> None:
        document["shards"][0]["raw_data"]["basename"] = "a"
        document["shards"][1]["raw_data"]["basename"] = "a/b"

    edit_index(source, nest)
    with pytest.raises(IndexFileError, match=r"'a'.*also named as a file"):
        read_index(source)


def test_a_lengths_entry_without_a_basename_is_named(tmp_path: Path):
    from streaming import LocalDataset
    from streaming.dataset.lengths import load_lengths

    source = clean_dataset(tmp_path / "ds", compression=None)
    count = json.loads((source / "index.json").read_text())["shards"]

    def lengths(document: dict) -> None:
        document["sample_lengths"] = {"dtype": "<u4", "files": [
            {"bytes": 4 * shard["samples"]} for shard in count]}

    edit_index(source, lengths)
    with pytest.raises(IndexFileError, match="basename"):
        load_lengths(LocalDataset(str(source)))


def test_the_command_line_module_prints_its_help():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "streaming.cli.main", "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "usage: streaming" in out


@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_inspect_and_validate_name_a_deeply_nested_index(tmp_path: Path, command: str):
    import subprocess
    import sys

    (tmp_path / "index.json").write_text("[" * 100_000 + "]" * 100_000)
    done = subprocess.run([sys.executable, "-m", "streaming.cli", command, str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr


def test_inspect_refuses_a_flooding_index_over_http(tmp_path: Path):
    import subprocess
    import sys

    source = clean_dataset(tmp_path / "source" / "ds")
    with HostileHTTPServer(source.parent) as server:
        server.attacks["ds/index.json"] = "flood"
        env = {**os.environ, "STREAMING_MAX_INDEX_BYTES": str(MiB)}
        done = subprocess.run([sys.executable, "-m", "streaming.cli", "inspect",
                               f"{server.endpoint}/ds"], capture_output=True, text=True,
                              timeout=60, env=env)
    assert done.returncode != 0 and "STREAMING_MAX_INDEX_BYTES" in done.stderr
