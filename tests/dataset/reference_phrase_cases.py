"""Situations that both this library and the reference (mosaicml-streaming) refuse or warn
about, each with the reference's key phrase that its message must contain.

Imported by tests/dataset/test_reference_phrases.py to run each case through ours; run as a
script by the reference venv's Python, it runs each case through the reference and prints what
each raised or warned as JSON. It therefore imports neither our package nor pytest at the top.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Api:
    """The three public classes a case uses, from whichever library runs it.

    Args:
        writer: the MDS writer class.
        dataset: the streaming dataset class.
        stream: the stream class.
    """

    writer: type
    dataset: type
    stream: type


@dataclass(frozen=True)
class Case:
    """One situation and what both libraries must say about it.

    Args:
        phrase: the reference's key phrase, which the message must contain.
        kind: the builtin exception type both raise, or "warning" when both warn.
        run: triggers the situation, given the library and a folder of prepared datasets.
    """

    phrase: str
    kind: str
    run: Callable[[Api, Path], object]


def prepare(api: Api, root: Path) -> None:
    """Write the datasets the cases read: `a` and `b` (200 int samples, 3 shards each), an
    index without shards (`empty`), one of an unknown version (`v3`) and an empty index file
    (`blank`)."""
    for name in ("a", "b"):
        with api.writer(out=str(root / name), columns={"x": "int"}, size_limit=1000) as out:
            for i in range(200):
                out.write({"x": i})
    for name, version in (("empty", 2), ("v3", 3)):
        (root / name).mkdir()
        (root / name / "index.json").write_text(json.dumps({"version": version, "shards": []}))
    (root / "blank").mkdir()
    (root / "blank" / "index.json").write_text("")


def _ds(api: Api, root: Path, **kwargs: object) -> object:
    return api.dataset(local=str(root / "a"), **kwargs)


def _two(api: Api, root: Path, first: dict, second: dict, **kwargs: object) -> object:
    streams = [api.stream(local=str(root / "a"), **first),
               api.stream(local=str(root / "b"), **second)]
    return api.dataset(streams=streams, **kwargs)


def _writer(api: Api, root: Path, name: str, **kwargs: object) -> None:
    api.writer(out=str(root / name), columns=kwargs.pop("columns", {"x": "int"}), **kwargs)


def _resume(api: Api, root: Path, method: str) -> None:
    """Resume 6 samples into an epoch of global batches of 4."""
    ds = _two(api, root, {"proportion": 0.5}, {"proportion": 0.5}, batching_method=method,
              batch_size=4, num_canonical_nodes=1)
    ds.load_state_dict({"epoch": 0, "sample_in_epoch": 6, "num_canonical_nodes": 1,
                        "shuffle_seed": ds.shuffle_seed, "initial_physical_nodes": 1})
    list(ds)


CASES: dict[str, Case] = {
    "unknown sampling method": Case(
        "Invalid sampling method: x.", "ValueError", lambda a, r: _ds(a, r, sampling_method="x")),
    "unknown batching method": Case(
        "Invalid batching method: x.", "ValueError", lambda a, r: _ds(a, r, batching_method="x")),
    "predownload below batch_size": Case(
        "predownload < batch_size (1 < 4)", "warning",
        lambda a, r: _ds(a, r, predownload=1, batch_size=4)),
    "predownload below batch_size, the advice": Case(
        "This may result in slower batch time. Recommendation is to set", "warning",
        lambda a, r: _ds(a, r, predownload=1, batch_size=4)),
    "streams and local": Case(
        "You must provide either `streams` or `remote`/`local`, but not both", "ValueError",
        lambda a, r: a.dataset(streams=[a.stream(local=str(r / "a"))], local=str(r / "b"))),
    "no streams, remote or local": Case(
        "You must provide either `streams` or `remote`/`local`", "ValueError",
        lambda a, r: a.dataset()),
    "sampling_granularity 0": Case(
        "`sampling_granularity` must be a positive integer", "ValueError",
        lambda a, r: _ds(a, r, sampling_granularity=0)),
    "negative shuffle_seed": Case(
        "`shuffle_seed` must be a non-negative integer", "ValueError",
        lambda a, r: _ds(a, r, shuffle_seed=-1)),
    "negative epoch_size": Case(
        "Epoch size cannot be negative", "ValueError", lambda a, r: _ds(a, r, epoch_size=-1)),
    "proportion and repeat": Case(
        "At most one of `proportion`, `repeat`, and `choose` may be specified", "ValueError",
        lambda a, r: a.stream(local=str(r / "a"), proportion=0.5, repeat=2)),
    "negative proportion": Case(
        "`proportion` must be non-negative", "ValueError",
        lambda a, r: _two(a, r, {"proportion": -1}, {"proportion": 1})),
    "negative repeat": Case(
        "`repeat` must be non-negative", "ValueError",
        lambda a, r: _two(a, r, {"repeat": -1}, {"repeat": 1})),
    "negative choose": Case(
        "`choose` must be non-negative", "ValueError",
        lambda a, r: _two(a, r, {"choose": -1}, {"choose": 1})),
    "negative download_retry": Case(
        "`download_retry` must be non-negative", "ValueError",
        lambda a, r: a.stream(local=str(r / "a"), download_retry=-1)),
    "download_timeout 0": Case(
        "`download_timeout` must be positive", "ValueError",
        lambda a, r: a.stream(local=str(r / "a"), download_timeout=0)),
    "negative replication": Case(
        "Replication factor must be positive", "ValueError",
        lambda a, r: _ds(a, r, replication=-1)),
    "relative and absolute weights": Case(
        "Relative (`proportion`) and absolute (`repeat`, `choose`, none) stream weights are "
        "incompatible", "ValueError", lambda a, r: _two(a, r, {"proportion": 0.5}, {"repeat": 2})),
    "index without shards": Case(
        "Stream contains no samples", "RuntimeError",
        lambda a, r: a.dataset(local=str(r / "empty"))),
    "missing index": Case(
        "does not exist", "RuntimeError", lambda a, r: a.dataset(local=str(r / "missing"))),
    "missing index without a remote": Case(
        "No `remote` provided, but local file", "RuntimeError",
        lambda a, r: a.dataset(streams=[a.stream(remote=None, local=str(r / "missing"))])),
    "index missing at the remote": Case(
        "No such file or directory", "FileNotFoundError",
        lambda a, r: list(a.dataset(remote=str(r / "missing"), local=str(r / "c3"),
                                    download_timeout=1, batch_size=1))),
    "empty index file": Case(
        "is empty or corrupted", "JSONDecodeError",
        lambda a, r: a.dataset(local=str(r / "blank"), batch_size=1)),
    "index version 3": Case(
        "Unsupported streaming data version: 3. Expected version 2.", "ValueError",
        lambda a, r: a.dataset(local=str(r / "v3"))),
    "cache_limit below one shard": Case(
        "is larger than the cache limit (10 bytes)", "ValueError",
        lambda a, r: list(a.dataset(remote=str(r / "a"), local=str(r / "c1"), cache_limit=10))),
    "cache_limit just above the index": Case(
        "is too low", "ValueError",
        lambda a, r: list(a.dataset(remote=str(r / "a"), local=str(r / "c3"),
                                    cache_limit=(r / "a" / "index.json").stat().st_size + 300))),
    "eviction with nothing cached": Case(
        "Attempted shard eviction, but there are no shards present locally to evict",
        "ValueError",
        lambda a, r: a.dataset(remote=str(r / "a"), local=str(r / "c2")).evict_coldest_shard()),
    "stratified stream too small": Case(
        "Number of samples for stream 1 is 0", "ValueError",
        lambda a, r: list(_two(a, r, {"proportion": 0.99}, {"proportion": 0.01}, epoch_size=40,
                               batching_method="stratified", batch_size=4))),
    "per_stream stream too small": Case(
        "Stream with index 1 does not have an adequate number of samples to construct",
        "ValueError",
        lambda a, r: list(_two(a, r, {"repeat": 1}, {"choose": 2}, batching_method="per_stream",
                               batch_size=4))),
    "device_per_stream stream too small": Case(
        "Stream with index 1 does not have an adequate number of samples to construct",
        "ValueError",
        lambda a, r: list(_two(a, r, {"repeat": 1}, {"choose": 2}, batch_size=4,
                               batching_method="device_per_stream"))),
    "stratified resume inside a batch": Case(
        "Because of the `stratified` batching method, resumption may", "warning",
        lambda a, r: _resume(a, r, "stratified")),
    "py1e block smaller than a shard": Case(
        "Shuffle block size was smaller than shard size for some shards", "warning",
        lambda a, r: list(_ds(a, r, shuffle=True, shuffle_block_size=4, batch_size=2))),
    "fewer samples than canonical nodes": Case(
        "Trying to partition 10 samples over 64 canonical nodes", "warning",
        lambda a, r: list(_ds(a, r, epoch_size=10, num_canonical_nodes=64, batch_size=2))),
    "size_limit of 4 GiB": Case(
        "`size_limit` must be less than 2**32", "ValueError",
        lambda a, r: _writer(a, r, "w1", size_limit=2**32)),
    "unknown compression": Case(
        "Invalid compression: nope.", "ValueError",
        lambda a, r: _writer(a, r, "w2", compression="nope")),
    "unknown hash": Case(
        "Invalid hash: nope.", "ValueError", lambda a, r: _writer(a, r, "w3", hashes=["nope"])),
    "output folder not empty": Case(
        "Directory is not empty", "FileExistsError", lambda a, r: _writer(a, r, "a")),
    "unknown writer argument": Case(
        "Invalid Writer argument", "ValueError", lambda a, r: _writer(a, r, "w5", min_workers=1)),
    "unknown encoding": Case(
        "encoding `nope` is unsupported", "TypeError",
        lambda a, r: _writer(a, r, "w4", columns={"x": "nope"})),
}


@dataclass(frozen=True)
class Outcome:
    """What running a case raised (its type's and bases' names) or warned.

    Args:
        types: names of the raised exception's classes, or ["warning"] when only warned.
        message: the exception's message, or every warning's message joined by newlines.
    """

    types: list[str]
    message: str


def outcome(case: Case, api: Api, root: Path) -> Outcome:
    """Run `case` and record what it raised, else what it warned (empty when neither)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            case.run(api, root)
        except Exception as exc:  # any exception is the outcome being recorded
            return Outcome([t.__name__ for t in type(exc).__mro__], str(exc))
    return Outcome(["warning"] if caught else [], "\n".join(str(w.message) for w in caught))


def _reference_api() -> Api:
    # The reference's top-level package also imports its vision extras, whose torchvision
    # may not load beside a CPU-only torch: load `streaming.base` without it.
    package = types.ModuleType("streaming")
    package.__path__ = [os.path.join(sysconfig.get_paths()["purelib"], "streaming")]
    sys.modules["streaming"] = package
    from streaming.base import MDSWriter, Stream, StreamingDataset

    return Api(MDSWriter, StreamingDataset, Stream)


def main() -> None:
    """In the reference's venv: prepare the data in argv[1] and print every case's outcome."""
    import logging

    logging.disable(logging.WARNING)
    api, root = _reference_api(), Path(sys.argv[1])
    prepare(api, root)
    done = {}
    for name, case in CASES.items():
        result = outcome(case, api, root)
        done[name] = {"types": result.types, "message": result.message[:4000]}
    print(json.dumps(done))


if __name__ == "__main__":
    main()
