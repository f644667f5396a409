"""`streaming plan` with `packing: true`: the sample lengths every node reads before its first
batch are in the egress prediction (the side files of a stream that records them, every shard
of one that does not), and equal what a packed dataset fetched from the loopback S3 server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming import PackedStreamingDataset
from streaming.format.index import read_index
from streaming.stream import Stream
from tests.support.datasets import upload_dir, write_tokens

TOPOLOGY = "topology: {nodes: 3, ranks_per_node: 2, workers_per_rank: 1}\n"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """`sides/`: token samples whose index records their lengths; `bare/`: zstd token samples
    without (as the reference writes them)."""
    root = tmp_path_factory.mktemp("plan-lengths")
    write_tokens(root / "sides", 300, seed=1, size_limit=1 << 13)
    write_tokens(root / "bare", 200, start=10_000, seed=2, lengths=None, size_limit=1 << 13,
                 compression="zstd")
    return root


def _side_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.lengths"))


def _shard_bytes(folder: Path) -> int:
    index = read_index(folder)
    fetch = np.where(index.zip_bytes > 0, index.zip_bytes, index.raw_bytes)
    return int(fetch[index.samples_per_shard > 0].sum())


def _plan(cli, config: Path, *args: str, env: dict | None = None) -> dict:
    ran = cli("plan", config, "--json", *args, env=env)
    assert ran.code == 0, ran.err
    return ran.json()


def _config(tmp_path: Path, streams: str, extra: str = "") -> Path:
    config = tmp_path / "run.yaml"
    config.write_text(f"streams:\n{streams}batch_size: 4\nshuffle: true\n{TOPOLOGY}{extra}")
    return config


def test_lengths_are_side_files_or_whole_shards_for_every_node(cli, folders, tmp_path):
    streams = f"  - {{local: '{folders / 'sides'}'}}\n  - {{local: '{folders / 'bare'}'}}\n"
    plain = _plan(cli, _config(tmp_path, streams), "--restart-step", "10")
    packed = _plan(cli, _config(tmp_path, streams, "packing: true\n"), "--restart-step", "10")
    per_node = _side_bytes(folders / "sides") + _shard_bytes(folders / "bare")
    assert _side_bytes(folders / "sides") == 4 * 300
    assert packed["lengths"] == {"columns": ["tokens"], "scanned_streams": [str(folders / "bare")],
                                 "bytes_per_node": per_node, "egress_bytes": 3 * per_node}
    assert [n["lengths_bytes"] for n in packed["nodes"]] == [per_node] * 3
    assert packed["egress_bytes_per_epoch"] == plain["egress_bytes_per_epoch"]
    assert packed["egress_bytes"] == plain["egress_bytes"] + 3 * per_node
    # side files and the scan's result stay in the cache folders, under the limit
    assert packed["other_bytes"] == plain["other_bytes"] + 4 * (300 + 200)
    # fresh disks read the lengths again
    extra = packed["restart"]["extra_egress_bytes"] - plain["restart"]["extra_egress_bytes"]
    assert extra == 3 * per_node
    assert "lengths" not in plain and all("lengths_bytes" in n for n in plain["nodes"])


def test_a_column_the_side_files_do_not_record_is_scanned(cli, folders, tmp_path):
    streams = f"  - {{local: '{folders / 'sides'}'}}\n"
    got = _plan(cli, _config(tmp_path, streams, "packing: true\npacking_column: id\n"))
    assert got["lengths"]["scanned_streams"] == [str(folders / "sides")]
    assert got["lengths"]["bytes_per_node"] == _shard_bytes(folders / "sides")


def test_a_stream_read_in_place_costs_nothing(cli, folders, tmp_path, s3_env):
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "bare", folders / "bare")
    streams = (f"  - {{remote: 's3://{bucket}/bare', local: '{tmp_path / 'c'}'}}\n"
               f"  - {{local: '{folders / 'sides'}'}}\n")
    got = _plan(cli, _config(tmp_path, streams, "packing: true\n"))
    assert got["lengths"]["bytes_per_node"] == _shard_bytes(folders / "bare")


def test_plan_lines_name_the_streams_scanned(cli, folders, tmp_path):
    streams = f"  - {{local: '{folders / 'bare'}', name: bare}}\n"
    ran = cli("plan", _config(tmp_path, streams, "packing: true\n"), "--png",
              str(tmp_path / "b.png"), "--cache-png", str(tmp_path / "c.png"))
    if ran.code != 0 and "plot" in ran.err:
        pytest.skip("the plot extra is not installed")
    assert ran.code == 0, ran.err
    assert "no side files: bare scanned whole" in ran.out
    assert "streaming lengths" in ran.out


def test_a_bad_packing_setting_is_refused(cli, folders, tmp_path):
    streams = f"  - {{local: '{folders / 'sides'}'}}\n"
    ran = cli("plan", _config(tmp_path, streams, "packing: maybe\n"), "--json")
    assert ran.code != 0 and "packing must be true or false" in ran.err
    ran = cli("plan", _config(tmp_path, streams, "packing: true\npacking_column: 3\n"), "--json")
    assert ran.code != 0 and "packing_column" in ran.err


def test_predicted_lengths_bytes_equal_what_a_packed_dataset_fetched(
        cli, folders, tmp_path, s3_env, fault_proxy, monkeypatch):
    bucket = s3_env.make_bucket()
    for name in ("sides", "bare"):
        upload_dir(s3_env.client(), bucket, name, folders / name)
    streams = "".join(f"  - {{remote: 's3://{bucket}/{name}', local: '{tmp_path / name}'}}\n"
                      for name in ("sides", "bare"))
    predicted = _plan(cli, _config(tmp_path, streams, "packing: true\n"))["lengths"]
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ds = PackedStreamingDataset(streams=[Stream(remote=f"s3://{bucket}/{name}",
                                          local=str(tmp_path / "run" / name))
                                   for name in ("sides", "bare")],
                                batch_size=4, packing_length=512)
    try:
        fetched = 0
        for request in proxy.log:
            key = request.path.split(f"/{bucket}/", 1)[1]
            if request.method == "GET" and not key.endswith("index.json"):
                fetched += (folders / key).stat().st_size
        assert fetched == predicted["bytes_per_node"] > 0
    finally:
        ds.close()
