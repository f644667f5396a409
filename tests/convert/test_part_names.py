"""Conversions name part folders `part-00000/` like Spark, Ray and Dask; datasets converted
before, with `part00000/` folders, still read, merge, grow and get replaced."""

from __future__ import annotations

import json
from pathlib import Path

from streaming.format.index import merge_index
from tests.support.converted import read_samples
from writers.convert import convert


def jsonl(path: Path, start: int, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(start, start + n)))
    return path


def old_layout(tmp_path: Path) -> Path:
    """A two-part conversion renamed to the earlier `partNNNNN/` layout, index included."""
    out = tmp_path / "old"
    convert(jsonl(tmp_path / "a.jsonl", 0, 60), out, workers=2, progress=False)
    for part in sorted(out.glob("part-*")):
        part.rename(out / part.name.replace("-", ""))
    text = (out / "index.json").read_text().replace('"part-', '"part')
    (out / "index.json").write_text(text)
    (out / ".convert-plan.json").unlink()
    return out


def test_convert_writes_dashed_part_names(tmp_path: Path):
    out = tmp_path / "out"
    convert(jsonl(tmp_path / "a.jsonl", 0, 60), out, workers=2, progress=False)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["part-00000", "part-00001"]


def test_old_part_names_read_merge_append_and_are_replaced(tmp_path: Path):
    out = old_layout(tmp_path)
    assert [s["id"] for s in read_samples(out)] == list(range(60))
    merge_index(out)  # found by scanning the folders, in order
    assert [s["id"] for s in read_samples(out)] == list(range(60))
    convert(jsonl(tmp_path / "b.jsonl", 60, 20), out, mode="append", progress=False)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "part-00002", "part00000", "part00001"]
    assert [s["id"] for s in read_samples(out)] == list(range(80))
    merge_index(out)  # old names sort before the new ones: the order holds
    assert [s["id"] for s in read_samples(out)] == list(range(80))
    convert(jsonl(tmp_path / "c.jsonl", 0, 5), out, exist_ok=True, progress=False)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["part-00000"]
