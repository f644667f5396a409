"""`record_lengths` / `streaming lengths`: datasets written without sample lengths (the
reference's own fixtures, our writer without `lengths=`) get the side files and index key
MDSWriter(lengths=column) writes, in a folder and in an object store (moto S3 on loopback),
read back by our packers and still read by the reference implementation."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from streaming import PackedStreamingDataset
from streaming.cli.main import main
from streaming.dataset.lengths import load_lengths
from streaming.errors import ArgumentError, FormatError, ShardCorruptError
from streaming.format.index import LENGTHS_KEY, read_index
from streaming.packing.record_lengths import record_lengths
from tests.packing.test_lengths import reference_style_read
from tests.parity.test_reference_parity import reference_python, without_reference
from tests.support.datasets import write_tokens
from writers.mds import MDSWriter
from writers.text_writers import JSONWriter

EXPECTED = "expected.json"


def _copy(reference_fixtures: Path, name: str, to: Path) -> Path:
    shutil.copytree(reference_fixtures / name, to)
    return to


def _expected_lengths(reference_fixtures: Path, name: str, column: str) -> list[int]:
    samples = json.loads((reference_fixtures / EXPECTED).read_text())["datasets"][name]["samples"]
    value = [s[column] for s in samples]
    if "shape" in value[0]:
        return [int(v["shape"][0]) for v in value]
    return [len(base64.b64decode(v["b64"])) for v in value]


@pytest.mark.parametrize(("name", "column"), [("llm_zstd", "tokens"), ("llm_hashed", "tokens"),
                                              ("merged", "tokens"), ("oversize", "blob")])
def test_reference_datasets_get_the_lengths_of_their_samples(reference_fixtures, tmp_path,
                                                             name, column) -> None:
    out = _copy(reference_fixtures, name, tmp_path / name)
    done = record_lengths(out, column)
    expected = _expected_lengths(reference_fixtures, name, column)
    assert (done.shards, done.samples, done.total) == (
        read_index(out).num_shards, len(expected), sum(expected))
    spec = json.loads((out / "index.json").read_text())[LENGTHS_KEY]
    assert spec["column"] == column and len(spec["files"]) == read_index(out).num_shards
    np.testing.assert_array_equal(load_lengths(out), expected)  # the side files, not a scan
    assert not list(out.glob(".lengths.*"))  # no scan cache was needed
    assert reference_style_read(out) == reference_style_read(reference_fixtures / name)


def test_the_recorded_index_and_side_files_are_the_writers_own(tmp_path) -> None:
    for compression in (None, "zstd"):
        kw = {"compression": compression, "hashes": ["sha1", "xxh64"]}
        written = tmp_path / f"with-{compression}"
        recorded = tmp_path / f"without-{compression}"
        write_tokens(written, 120, lengths="tokens", **kw)
        write_tokens(recorded, 120, lengths=None, **kw)
        assert LENGTHS_KEY not in json.loads((recorded / "index.json").read_text())
        record_lengths(recorded, "tokens")
        assert (recorded / "index.json").read_bytes() == (written / "index.json").read_bytes()
        sides = sorted(p.name for p in written.glob("*.lengths"))
        assert sides and sides == sorted(p.name for p in recorded.glob("*.lengths"))
        for side in sides:
            assert (recorded / side).read_bytes() == (written / side).read_bytes()


def test_the_reference_still_reads_a_dataset_with_recorded_lengths(reference_fixtures,
                                                                    tmp_path) -> None:
    python = reference_python()
    if python is None:
        without_reference("the reference implementation's venv is missing: run `make "
                          "reference-venv` or set STREAMING_REFERENCE_PYTHON to its python")
    out = _copy(reference_fixtures, "llm_zstd", tmp_path / "llm")
    record_lengths(out, "tokens")
    script = """
import json, os, sys, sysconfig, types
package = types.ModuleType("streaming")
package.__path__ = [os.path.join(sysconfig.get_paths()["purelib"], "streaming")]
sys.modules["streaming"] = package
from streaming.base import StreamingDataset
ds = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], validate_hash=None, batch_size=1)
print(json.dumps([[int(ds[i]["id"]), len(ds[i]["tokens"])] for i in range(ds.num_samples)]))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # never our `streaming`
    done = subprocess.run([str(python), "-c", script, str(out), str(tmp_path / "cache")],
                          env=env, text=True, capture_output=True, timeout=300,
                          cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert [length for _, length in read] == _expected_lengths(reference_fixtures, "llm_zstd",
                                                                "tokens")
    assert [i for i, _ in read] == sorted(i for i, _ in read)


def test_in_an_object_store_a_packed_dataset_then_reads_no_shard(s3_env, reference_fixtures,
                                                                 tmp_path, capsys) -> None:
    bucket = s3_env.make_bucket()
    client = s3_env.client()
    src = reference_fixtures / "llm_zstd"
    for path in sorted(src.iterdir()):
        client.upload_file(str(path), bucket, f"llm/{path.name}")
    before = client.get_object(Bucket=bucket, Key="llm/index.json")["Body"].read()
    assert main(["lengths", f"s3://{bucket}/llm", "--column", "tokens"]) == 0
    assert "lengths of 'tokens' for" in capsys.readouterr().out
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    sides = {f"llm/{p.name.removesuffix('.zstd')}.lengths" for p in src.glob("*.zstd")}
    assert sides and sides <= keys
    after = client.get_object(Bucket=bucket, Key="llm/index.json")["Body"].read()
    assert json.loads(after)["shards"] == json.loads(before)["shards"]
    ds = PackedStreamingDataset(remote=f"s3://{bucket}/llm", local=str(tmp_path / "cache"),
                                batch_size=4, packing_length=256)
    np.testing.assert_array_equal(ds.lengths,
                                  _expected_lengths(reference_fixtures, "llm_zstd", "tokens"))
    cached = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert any(name.endswith(".lengths") for name in cached)
    assert not [name for name in cached if name.endswith((".mds", ".zstd"))], cached
    assert main(["lengths", f"s3://{bucket}/llm", "--column", "tokens"]) == 0
    assert "already" in capsys.readouterr().out


def test_recorded_already_another_column_and_force(tmp_path) -> None:
    sizes = write_tokens(tmp_path / "d", 60, lengths="tokens")
    index = (tmp_path / "d" / "index.json").read_bytes()
    done = record_lengths(tmp_path / "d", "tokens")
    assert (done.shards, done.total) == (0, None)
    assert (tmp_path / "d" / "index.json").read_bytes() == index
    with pytest.raises(ArgumentError, match=r"records the lengths of 'tokens'.*'id'"):
        record_lengths(tmp_path / "d", "id")
    done = record_lengths(tmp_path / "d", "id", force=True)
    assert done.total == sum(range(60))
    np.testing.assert_array_equal(load_lengths(tmp_path / "d"), np.arange(60))
    np.testing.assert_array_equal(load_lengths(tmp_path / "d", "tokens"), sizes)  # scanned


def test_bad_input_is_named_and_publishes_nothing(reference_fixtures, tmp_path) -> None:
    out = _copy(reference_fixtures, "llm_zstd", tmp_path / "llm")
    index = (out / "index.json").read_bytes()
    with pytest.raises(FormatError, match=r"no column 'input_ids'"):
        record_lengths(out, "input_ids")
    broken = out / "shard.00002.mds.zstd"
    broken.write_bytes(broken.read_bytes()[:-9])
    with pytest.raises(ShardCorruptError, match=r"shard\.00002\.mds\.zstd"):
        record_lengths(out, "tokens")
    assert (out / "index.json").read_bytes() == index
    assert main(["lengths", str(tmp_path / "nowhere"), "--column", "tokens"]) == 2
    with MDSWriter(columns={"id": "int"}, out=str(tmp_path / "big")) as writer:
        for i in range(20):
            writer.write({"id": (1 << 33) + i})  # a length beyond uint32
    big_index = (tmp_path / "big" / "index.json").read_bytes()
    with pytest.raises(FormatError, match=r"'id' has lengths that do not fit uint32"):
        record_lengths(tmp_path / "big", "id")
    assert (tmp_path / "big" / "index.json").read_bytes() == big_index
    with JSONWriter(columns={"text": "str"}, out=str(tmp_path / "json")) as writer:
        writer.write({"text": "a line"})
    with pytest.raises(FormatError, match=r"MDS shards, not 'json'"):
        record_lengths(tmp_path / "json", "text")
