"""convert() reads its input from every object store: a prefix and a glob where the store can
list (S3, GCS, Azure), file URLs one by one where it cannot (HTTP)."""

from __future__ import annotations

import json

import pytest

from streaming.errors import UnsupportedFeatureError
from tests.support.converted import read_samples
from writers.convert import convert


def test_a_prefix_a_glob_or_file_urls(store_env, tmp_path):
    space = store_env.space()
    for k in range(3):
        body = "".join(json.dumps({"id": k * 10 + i}) + "\n" for i in range(10)).encode()
        store_env.put(space, f"raw/f{k}.jsonl", body)
    store_env.put(space, "raw/_SUCCESS", b"")
    prefix = store_env.url(space, "raw/")
    if store_env.writable:
        result = convert(prefix, tmp_path / "out", workers=2, progress=False)
        assert [s["id"] for s in read_samples(tmp_path / "out")] == list(range(30))
        assert len(result.file_samples) == 3
        convert(store_env.url(space, "raw/f[02].jsonl"), tmp_path / "glob", progress=False)
        assert [s["id"] for s in read_samples(tmp_path / "glob")] == [
            *range(10), *range(20, 30)]
        return
    with pytest.raises(UnsupportedFeatureError, match="give the file URLs one by one"):
        convert(prefix, tmp_path / "out", progress=False)
    urls = [store_env.url(space, f"raw/f{k}.jsonl") for k in (2, 0)]
    convert(urls, tmp_path / "list", progress=False)
    assert [s["id"] for s in read_samples(tmp_path / "list")] == [*range(20, 30), *range(10)]
