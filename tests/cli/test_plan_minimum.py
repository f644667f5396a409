"""One minimum cache_limit: `streaming plan` and StreamingDataset compute the same figure for
the same config and topology, refuse a limit under it with the same CacheLimitError (naming the
minimum and the limit that holds every shard), and accept one at or above it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from streaming import Stream, StreamingDataset
from streaming.errors import CacheLimitError
from streaming.format.index import read_index
from tests.support.datasets import write_dataset

CONFIGS = {
    "one stream": ("streams:\n  - {{remote: '{a}', local: '{tmp}/a'}}\n", None),
    "70/30 mix, half epoch": (
        "streams:\n  - {{remote: '{a}', local: '{tmp}/a', proportion: 0.7}}\n"
        "  - {{remote: '{b}', local: '{tmp}/b', proportion: 0.3}}\nepoch_size: 3000\n", 3000),
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("minimum")
    for name in ("a", "b"):
        write_dataset(root / name, 3000, size_limit=32 << 10)
    return root / "a", root / "b"


def _minimum(cli, config: Path) -> tuple[int, int]:
    ran = cli("plan", config, "--json")
    assert ran.code == 0, ran.err
    report = ran.json()
    return report["min_cache_bytes"], report["no_eviction_cache_bytes"]


def _dataset(text: str, tmp: Path, limit: int, epoch_size: int | None, algo: str,
             method: str) -> StreamingDataset:
    streams = []
    for match in re.finditer(r"remote: '([^']+)', local: '([^']+)'(?:, proportion: ([0-9.]+))?",
                             text):
        remote, local, share = match.groups()
        shutil.rmtree(local, ignore_errors=True)
        streams.append(Stream(remote=remote, local=local,
                              proportion=None if share is None else float(share)))
    return StreamingDataset(streams=streams, cache_limit=limit, batch_size=8, shuffle=True,
                            shuffle_algo=algo, batching_method=method, epoch_size=epoch_size)


@pytest.mark.parametrize("algo", ["py1e", "py1s"])
@pytest.mark.parametrize("method", ["random", "stratified"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_plan_and_dataset_state_and_enforce_one_minimum(cli, sources, tmp_path, name, algo,
                                                       method):
    text, epoch_size = CONFIGS[name]
    text = text.format(a=sources[0], b=sources[1], tmp=tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text(text + f"batch_size: 8\nshuffle: true\nshuffle_algo: {algo}\n"
                             f"batching_method: {method}\n")
    minimum, whole = _minimum(cli, config)
    indexes = [read_index(s) for s in sources[:text.count("remote:")]]
    raw = sum(int(ix.raw_bytes.sum()) for ix in indexes)
    zipped = max(int(ix.zip_bytes.max()) for ix in indexes)
    # never above the data: every raw shard, one compressed copy in flight, index and markers
    assert 0 < minimum <= whole <= raw + zipped + 64 * 1024
    under = int(minimum * 0.97)
    with pytest.raises(CacheLimitError) as refused:
        _dataset(text, tmp_path, under, epoch_size, algo, method)
    named = int(re.search(r"Minimum cache usage \((\d+) bytes\)", str(refused.value)).group(1))
    assert abs(named - minimum) <= 0.02 * minimum  # other files differ by a few bytes at most
    assert "holds every shard" in str(refused.value)
    ran = cli("plan", config, "--json", "--cache-limit", str(under))
    assert ran.code != 0 and "Minimum cache usage" in ran.err
    ds = _dataset(text, tmp_path, int(minimum * 1.03), epoch_size, algo, method)
    ds.close()
    assert cli("plan", config, "--json", "--cache-limit", str(int(minimum * 1.03))).code == 0


def test_plan_says_how_far_samples_move_under_the_limit(cli, sources, tmp_path):
    text, _ = CONFIGS["70/30 mix, half epoch"]
    config = tmp_path / "run.yaml"
    config.write_text(text.format(a=sources[0], b=sources[1], tmp=tmp_path)
                      + "batch_size: 8\nshuffle: true\n")
    minimum, _ = _minimum(cli, config)
    ran = cli("plan", config, "--json", "--cache-limit", str(2 * minimum))
    report = ran.json()
    assert report["shuffle_block_size"] == report["shuffle_block_samples"] > 0  # fitted
    # 3000 samples over ~70 shards: a shard gives the half epoch ~43 samples on average
    per_shard = 3000 / sum(len(list(s.glob("shard.*.mds.zstd"))) for s in sources)
    assert report["shuffle_block_shards"] == pytest.approx(
        report["shuffle_block_size"] / per_shard, rel=0.05)
    text_run = cli("plan", config, "--cache-limit", str(2 * minimum), "--png",
                   tmp_path / "b.png")
    assert "shuffle block" in text_run.out and "shards of this epoch" in text_run.out
