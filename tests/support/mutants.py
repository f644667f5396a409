"""Reader fuzzing: mutate a small dataset's index.json or shard bytes at random, read it back,
and classify the outcome.

A reader may answer a mutant with one of the project's typed errors (StreamingError) or with
the data; with hash validation on, and for a remote read into a cache (whose downloads are
checked against the index's xxh64 digests by default), data must equal what was written.
Anything else (another exception type, a hang, wrong data where it must be exact) is a
failure, reported with the seed that reproduces it. Used by tests/format/test_fuzz_readers.py
(bounded) and benchmarks/fuzz_readers.py (as long as asked).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import StreamingError
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "blob": "bytes", "tokens": "ndarray:int32",
           "meta": "json", "score": "float64"}
HASH = "sha1"
MUTANT_SECONDS = 20  # a reader still busy with one small mutant after this is hung
_INTERESTING = [0, 1, -1, 3, 7, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63,
                2**64, 10**8, 1.5, "", "x", None, True, [], {}, [1], {"a": 1}]
_U32 = [0, 1, 2, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1]


def sample(i: int) -> dict[str, Any]:
    """Sample `i` of the base dataset (every column kind the readers decode differently)."""
    return {"id": i, "text": f"text {i} " * (i % 5), "blob": bytes([i % 251]) * (i % 7),
            "tokens": np.arange(i % 9 + 1, dtype=np.int32) + i, "meta": {"k": i, "v": [i]},
            "score": i / 3}


def write_base(out: Path, compression: str | None, count: int = 60) -> None:
    """The dataset every mutant starts from: a few shards, hashes recorded."""
    with MDSWriter(columns=COLUMNS, out=out, compression=compression, hashes=[HASH, "xxh64"],
                   size_limit=1500) as writer:
        for i in range(count):
            writer.write(sample(i))


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two decoded samples are equal (arrays by value and dtype)."""
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


@dataclass
class Outcome:
    """What a reader made of one mutant."""

    seed: int
    mutation: str
    reader: str
    result: str  # "data", "typed" or "bad"
    detail: str = ""


@dataclass
class Tally:
    """Counts of outcomes, and the bad ones in full."""

    counts: dict[str, int] = field(default_factory=dict)
    bad: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.result] = self.counts.get(outcome.result, 0) + 1
        if outcome.result == "bad":
            self.bad.append(outcome)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# -- mutations -----------------------------------------------------------------------------

def _paths(node: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _mutate_json(document: dict, rng: random.Random) -> str:
    paths = [p for p in _paths(document) if p]
    path = rng.choice(paths)
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    action = rng.random()
    if action < 0.15 and isinstance(parent, dict):
        del parent[last]
        return f"delete {path}"
    old = parent[last]
    if isinstance(old, int) and not isinstance(old, bool) and action < 0.6:
        new = rng.choice([old + 1, old - 1, old * 2, old // 2, -old, old + 2**32,
                          *_INTERESTING])
    elif isinstance(old, str) and action < 0.6:
        new = rng.choice([old + "x", old[:-1], "../" + old, "/" + old, old.upper(), "",
                          "zstd:99", "ndarray:int33", "str", "int", "pkl"])
    else:
        new = rng.choice(_INTERESTING)
    parent[last] = new
    return f"set {path}={new!r:.40}"


def _mutate_bytes(data: bytearray, rng: random.Random, header_words: int = 0) -> str:
    action = rng.random()
    if not data:
        data.extend(rng.randbytes(rng.randint(1, 8)))
        return "fill empty"
    if action < 0.35:
        at = rng.randrange(len(data))
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        return f"flip bit {bit} of byte {at}"
    if action < 0.5:
        at = rng.randrange(len(data))
        size = min(rng.randint(1, 16), len(data) - at)
        data[at:at + size] = rng.randbytes(size)
        return f"overwrite {size} bytes at {at}"
    if action < 0.62:
        cut = rng.randrange(len(data))
        del data[cut:]
        return f"truncate to {cut}"
    if action < 0.7:
        extra = rng.randbytes(rng.randint(1, 64))
        data.extend(extra)
        return f"append {len(extra)} bytes"
    if action < 0.78:
        at = rng.randrange(len(data))
        del data[at:at + rng.randint(1, 8)]
        return f"delete bytes at {at}"
    words = max(1, min(header_words, len(data) // 4))
    at = 4 * rng.randrange(words)
    value = rng.choice(_U32)
    data[at:at + 4] = value.to_bytes(4, "little")[: len(data) - at]
    return f"u32 at {at} = {value}"


CANARY = "canary"  # a folder beside every mutant whose files no reader may touch


def hostile_names(canary: Path) -> list[str]:
    """File names a hostile index might give, aimed at `canary` (beside the mutant's folder and
    its cache: `<scratch>/canary`, the mutants at `<scratch>/<tmp>/ds`)."""
    return [str(canary / "victim"), f"../../{CANARY}/victim", f"../{CANARY}/victim",
            f"part0/../../../{CANARY}/victim", f"..\\..\\{CANARY}\\victim",
            "index.json", ".streaming-origin.json", ".streaming-origin.lock",
            "shard.00000.mds\x00x", "./shard.00000.mds", "x" * 300, "a//b.mds"]


def _hostile(document: dict, rng: random.Random, canary: Path) -> str:
    """Give a file entry of the index a hostile name (or another entry's name)."""
    entries = [(k, key) for k, shard in enumerate(document["shards"])
               for key in ("raw_data", "zip_data") if isinstance(shard.get(key), dict)]
    k, key = rng.choice(entries)
    other = document["shards"][(k + 1) % len(document["shards"])]["raw_data"]["basename"]
    names = [*hostile_names(canary), other]
    name = rng.choice(names)
    document["shards"][k][key]["basename"] = name
    return f"hostile shards[{k}].{key}.basename={name!r:.60}"


def mutate(base: Path, out: Path, rng: random.Random, canary: Path, side: random.Random,
           hostile: bool = False) -> str:
    """Make `out` a copy of dataset `base` with one random mutation; a description of it.

    Unchanged files are hard links (readers only ever add files, by rename), the mutated one
    a new file. With `hostile`, the mutation gives an index entry a hostile name
    (`hostile_names`, drawn from `side`), so a seed's other mutants stay what they were."""
    names = sorted(p.name for p in base.iterdir() if p.is_file())
    target = "index.json" if rng.random() < 0.4 or hostile else rng.choice(
        [n for n in names if n != "index.json"])
    out.mkdir(parents=True)
    for name in names:
        if name != target:
            os.link(base / name, out / name)
    data = bytearray((base / target).read_bytes())
    if target == "index.json" and (hostile or rng.random() < 0.75):
        document = json.loads(data)
        what = _hostile(document, side, canary) if hostile else _mutate_json(document, rng)
        data = bytearray(json.dumps(document).encode())
    else:
        words = 0 if not target.endswith(".mds") else int.from_bytes(data[:4], "little") + 2
        what = _mutate_bytes(data, rng, header_words=words)
    (out / target).write_bytes(bytes(data))
    return f"{target}: {what}"


# -- readers -------------------------------------------------------------------------------

def read_local(root: Path, validate: bool) -> list[dict[str, Any]]:
    """Every sample through LocalDataset: iteration, then batched random access."""
    from streaming.dataset.local_dataset import LocalDataset

    dataset = LocalDataset(root, validate_hash=HASH if validate else None)
    samples = list(dataset)
    many = dataset.get_many(np.arange(len(dataset))[::-1])
    if len(many) != len(samples) or not all(same(a, b) for a, b in zip(samples, many[::-1])):
        raise AssertionError("LocalDataset iteration and get_many disagree")
    return samples


def read_streaming(root: Path, validate: bool) -> list[dict[str, Any]]:
    """Every sample through a read-in-place StreamingDataset, in plan order, by id."""
    from streaming import StreamingDataset

    dataset = StreamingDataset(local=str(root), batch_size=1,
                               validate_hash=HASH if validate else None)
    try:
        by_id = {int(s["id"]): s for s in dataset}
        return [by_id[i] for i in sorted(by_id)]
    finally:
        dataset.close()


def read_remote(root: Path, validate: bool) -> list[dict[str, Any]]:
    """Every sample through a StreamingDataset copying `root` (the remote) into a cache folder
    beside it, with the default checks only (no validate_hash), by id."""
    from streaming import StreamingDataset

    dataset = StreamingDataset(remote=str(root), local=str(root.parent / "cache"), batch_size=1,
                               download_retry=0, validate_hash=HASH if validate else None)
    try:
        by_id = {int(s["id"]): s for s in dataset}
        return [by_id[i] for i in sorted(by_id)]
    finally:
        dataset.close()


READERS: dict[str, Callable[[Path, bool], list[dict[str, Any]]]] = {
    "local": read_local, "local+hash": read_local, "streaming": read_streaming,
    "streaming+hash": read_streaming, "remote+cache": read_remote,
}
EXACT = ("local+hash", "streaming+hash", "remote+cache")  # readers that must return exact data


class _Hung(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hung()


def run_mutant(seed: int, bases: dict[str | None, Path], expected: list[dict[str, Any]],
               scratch: Path, reader: str, hostile: bool = False) -> Outcome:
    """Mutate a base dataset with `seed` (a hostile file name with `hostile`) and read it with
    `reader`; classify what happened (bad, whatever the reader did, when a file beside the
    mutant and its cache changed)."""
    rng = random.Random(seed)
    compression = rng.choice(list(bases))
    root = Path(tempfile.mkdtemp(dir=scratch)) / "ds"
    canary = scratch / CANARY
    side = random.Random(-1 - seed)  # hostile names draw here: `rng` stays as it was
    mutation = f"[{compression or 'raw'}] " + mutate(bases[compression], root, rng, canary,
                                                     side, hostile)
    before = _listing(canary)
    try:
        outcome = _read_mutant(seed, mutation, root, expected, reader)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
    after = _listing(canary)
    if after != before:
        return Outcome(seed, mutation, reader, "bad", "files outside the dataset and its cache "
                       f"changed: {sorted(before)} became {sorted(after)}")
    return outcome


def _read_mutant(seed: int, mutation: str, root: Path, expected: list[dict[str, Any]],
                 reader: str) -> Outcome:
    validate = reader.endswith("+hash")
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(MUTANT_SECONDS)
    try:
        got = READERS[reader](root, validate)
    except _Hung:
        return Outcome(seed, mutation, reader, "bad", f"no answer within {MUTANT_SECONDS} s")
    except StreamingError as exc:
        return Outcome(seed, mutation, reader, "typed", f"{type(exc).__name__}: {exc}"[:200])
    except Exception as exc:  # the very thing this fuzzer hunts
        return Outcome(seed, mutation, reader, "bad", f"{type(exc).__name__}: {exc}"[:300])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if reader in EXACT:
        wrong = _wrong_data(got, expected, complete=" index.json: " not in mutation)
        if wrong:
            why = "with validate_hash on" if validate else "with the index's digests"
            return Outcome(seed, mutation, reader, "bad", f"{wrong} {why}")
    return Outcome(seed, mutation, reader, "data")


def _listing(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (or a link) and its content."""
    return {str(p.relative_to(folder)): (os.readlink(p).encode() if p.is_symlink()
                                         else p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file() or p.is_symlink()}


def _wrong_data(got: list[dict[str, Any]], expected: list[dict[str, Any]],
                complete: bool) -> str:
    """Why `got` is not what hashed files can give ("" if it is): every sample exactly as
    written, none twice, and all of them unless the index itself was mutated (hashes protect
    the shard files; an index may describe fewer shards, consistently, and nothing can tell)."""
    seen: set[int] = set()
    for sample in got:
        key = sample.get("id")
        if not isinstance(key, int) or not 0 <= key < len(expected) or key in seen:
            return f"sample id {key!r} unknown or repeated"
        if not same(sample, expected[key]):
            return f"sample {key} differs from what was written"
        seen.add(key)
    if complete and len(seen) != len(expected):
        return f"{len(expected) - len(seen)} samples missing"
    return ""


def scratch_dir(fallback: Path) -> Path:
    """A folder for mutants: under /dev/shm when it can be used (thousands of small files
    are created and removed), else `fallback`."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="mds-fuzz-", dir=shm))
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def prepare_bases(scratch: Path) -> tuple[dict[str | None, Path], list[dict[str, Any]]]:
    """The raw and zstd base datasets under `scratch`, and the samples they hold."""
    bases: dict[str | None, Path] = {}
    (scratch / CANARY / "sub").mkdir(parents=True, exist_ok=True)
    for name in ("victim", "shard.00000.mds", "index.json", "sub/victim"):
        (scratch / CANARY / name).write_bytes(b"precious " * 20)
    for compression in (None, "zstd"):
        bases[compression] = scratch / f"base-{compression or 'raw'}"
        write_base(bases[compression], compression)
    return bases, read_local(bases[None], validate=True)  # decoded as the readers decode
