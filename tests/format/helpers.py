"""Test helpers: read a reference dataset with our format layer, compare with expected.json."""

from __future__ import annotations

import base64
import hashlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from streaming.format import DatasetIndex, ShardReader, decompress_file, read_index


def expected_datasets(fixtures: Path) -> dict[str, Any]:
    """`expected.json`'s per-dataset descriptions."""
    return json.loads((fixtures / "expected.json").read_text())["datasets"]


def raw_shard_paths(index: DatasetIndex, scratch: Path) -> list[Path]:
    """Raw shard files of a dataset, decompressing compressed-only shards into `scratch`."""
    paths = []
    for i in range(index.num_shards):
        raw = index.raw_path(i)
        if not raw.exists():
            raw = scratch / index.basenames[i]
            raw.parent.mkdir(parents=True, exist_ok=True)
            decompress_file(index.zip_path(i), raw, index.compression[i])
        paths.append(raw)
    return paths


def read_all(root: Path, scratch: Path, **codec_args: Any) -> list[dict[str, Any]]:
    """Every sample of the dataset at `root`, decoded, in index order."""
    index = read_index(root)
    codec = index.codec(**codec_args)
    samples = []
    for i, path in enumerate(raw_shard_paths(index, scratch)):
        with ShardReader(
            path, codec,
            expected_samples=int(index.samples_per_shard[i]),
            expected_bytes=int(index.raw_bytes[i]),
        ) as shard:
            samples.extend(shard.get(j) for j in range(len(shard)))
    return samples


def _image_matches(want: dict, got: Any) -> bool:
    return (
        got.mode == want["mode"]
        and list(got.size) == want["size"]
        and hashlib.sha256(got.tobytes()).hexdigest() == want["pixels_sha256"]
    )


def matches(want: dict, got: Any) -> bool:
    """Whether a decoded value is exactly what expected.json describes (type included)."""
    kind = want["type"]
    if kind == "bytes":
        return type(got) is bytes and got == base64.b64decode(want["b64"])
    if kind == "str":
        return type(got) is str and got == want["value"]
    if kind == "int":
        return type(got) is int and got == want["value"]
    if kind == "float":
        return type(got) is float and repr(got) == want["value"]
    if kind == "decimal":
        return type(got) is Decimal and str(got) == want["value"]
    if kind == "json":
        return got == want["value"]
    if kind == "scalar":
        return (
            isinstance(got, np.generic)
            and got.dtype == np.dtype(want["dtype"])
            and got.tobytes() == base64.b64decode(want["b64"])
        )
    if kind == "ndarray":
        return (
            isinstance(got, np.ndarray)
            and got.dtype == np.dtype(want["dtype"])
            and list(got.shape) == want["shape"]
            and got.tobytes() == base64.b64decode(want["b64"])
        )
    if kind == "image":
        return _image_matches(want, got)
    if kind == "image_list":
        return len(got) == len(want["items"]) and all(
            _image_matches(w, g) for w, g in zip(want["items"], got)
        )
    raise AssertionError(f"unknown expected type {kind!r}")
