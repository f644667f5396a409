"""Re-writing each reference dataset's samples with its writer_args reproduces its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.dataset.local_dataset import LocalDataset
from streaming.format.compression import decompress
from writers.mds import MDSWriter

RAW = ["all_encodings", "llm_raw", "oversize", "pickle"]
COMPRESSED = ["llm_zstd", "llm_zstd7", "llm_gz", "llm_bz2", "llm_br", "llm_snappy", "llm_hashed"]


def _rewrite(fixtures: Path, name: str, tmp_path: Path) -> Path:
    """Decode fixture `name` with LocalDataset and write it again with the same arguments."""
    args = json.loads((fixtures / "expected.json").read_text())["datasets"][name]["writer_args"]
    args = {"hashes": [], **args}  # the reference's default: no digests
    ds = LocalDataset(fixtures / name, cache_dir=tmp_path / "cache", allow_unsafe_types=True)
    out = tmp_path / "out"
    with MDSWriter(columns=ds.columns, out=out, **args) as writer:
        for i in range(len(ds)):
            writer.write(ds[i])
    return out


@pytest.mark.parametrize("name", RAW)
def test_raw_datasets_are_byte_identical(reference_fixtures: Path, name: str, tmp_path: Path):
    out = _rewrite(reference_fixtures, name, tmp_path)
    theirs = sorted(p.name for p in (reference_fixtures / name).iterdir())
    assert sorted(p.name for p in out.iterdir()) == theirs
    for filename in theirs:
        assert (out / filename).read_bytes() == (reference_fixtures / name / filename).read_bytes()


def _without_zip_details(shard: dict) -> dict:
    zipped = shard["zip_data"]
    return {**shard, "zip_data": {"basename": zipped["basename"], "algos": set(zipped["hashes"])}}


@pytest.mark.parametrize("name", COMPRESSED)
def test_compressed_datasets_match(reference_fixtures: Path, name: str, tmp_path: Path):
    out = _rewrite(reference_fixtures, name, tmp_path)
    ours = json.loads((out / "index.json").read_text())
    theirs = json.loads((reference_fixtures / name / "index.json").read_text())
    # Raw bytes, sizes and raw digests must agree; compressed bytes may differ by library version.
    assert [_without_zip_details(s) for s in ours["shards"]] == [
        _without_zip_details(s) for s in theirs["shards"]
    ]
    assert ours["version"] == theirs["version"] == 2
    for shard in ours["shards"]:
        codec, zip_name = shard["compression"], shard["zip_data"]["basename"]
        assert not (out / shard["raw_data"]["basename"]).exists()
        packed = (out / zip_name).read_bytes()
        assert len(packed) == shard["zip_data"]["bytes"]
        reference = decompress(codec, (reference_fixtures / name / zip_name).read_bytes())
        assert decompress(codec, packed) == reference


def test_images_round_trip(reference_fixtures: Path, tmp_path: Path):
    pytest.importorskip("PIL")
    out = _rewrite(reference_fixtures, "images", tmp_path)
    ours = LocalDataset(out)
    theirs = LocalDataset(reference_fixtures / "images", cache_dir=tmp_path / "cache2")
    assert len(ours) == len(theirs) == 40
    for i in range(len(ours)):
        a, b = ours[i], theirs[i]
        assert a["label"] == b["label"]
        assert a["pil"].tobytes() == b["pil"].tobytes() and a["pil"].mode == b["pil"].mode
        assert a["png"].tobytes() == b["png"].tobytes()
