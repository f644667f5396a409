"""Random sequences of what users do to a cache: write or rewrite datasets at two remotes, run
epochs through two `local` folders with various cache_limit / validate_hash, delete, truncate
or corrupt cached files, wipe a folder, switch a folder to another remote. Every sample served
must be one the dataset at that remote holds now; the only errors allowed are the documented
typed ones (a folder that caches another remote; a corrupted file read without validate_hash;
a remote that is gone while the local copy is incomplete).

A seeded loop, bounded in time (DEADLINE seconds over all seeds); a failure prints the seed and
the operations so far, which replay it exactly."""

from __future__ import annotations

import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from streaming import StreamingDataset
from streaming.errors import CacheOriginError, StorageError, StreamingError
from streaming.format.index import read_index
from writers.mds import MDSWriter

# What reading a corrupted file without hashes may raise: the library's typed errors only.
UNCHECKED_ERRORS = (StreamingError,)
DEADLINE = 40.0  # seconds for every seed together
STEPS = 60  # operations per seed
SEEDS = (1, 2, 3, 4, 5, 6)


@dataclass
class Remote:
    """A remote folder and the ids of the dataset written there last (None: nothing yet)."""

    path: Path
    ids: list[int] | None = None


@dataclass
class Local:
    """A local folder, the remote its cache holds (per the model), and whether a file in it
    was corrupted in place since an epoch last verified every shard."""

    path: Path
    remote: str | None = None
    tainted: bool = False
    synced: list[int] | None = None  # ids of the remote's version the folder last fetched


@dataclass
class World:
    rng: random.Random
    remotes: dict[str, Remote]
    locals: dict[str, Local]
    log: list[str] = field(default_factory=list)
    version: int = 0


def write(world: World, name: str) -> None:
    """(Re)write remote `name`: a new id range, random size, compression, shard size."""
    remote = world.remotes[name]
    rng = world.rng
    world.version += 1
    start = world.version * 10_000
    count = rng.randrange(30, 160)
    compression = rng.choice([None, "zstd"])
    size_limit = rng.choice([600, 1200, 4000])
    world.log.append(f"write {name}: {count} ids from {start}, {compression}, {size_limit}")
    if remote.path.exists():
        shutil.rmtree(remote.path)
    with MDSWriter(columns={"id": "int", "payload": "ndarray:int32"}, out=remote.path,
                   compression=compression, size_limit=size_limit, hashes=["xxh64"]) as w:
        for i in range(start, start + count):
            w.write({"id": i, "payload": np.full(3, i, dtype=np.int32)})
    remote.ids = list(range(start, start + count))


def epoch(world: World, local_name: str, remote_name: str) -> None:
    """One epoch of remote `remote_name` through `local_name`, checked against the model."""
    rng = world.rng
    remote, local = world.remotes[remote_name], world.locals[local_name]
    if remote.ids is None:
        write(world, remote_name)
    validate = rng.choice([None, "xxh64"])
    limit = rng.choice([None, "moderate", "large"])
    cache_limit = None if limit is None else _limit(remote.path, limit)
    # Now and then two DataLoader workers (processes sharing the node's cache table); not on
    # a corrupted folder read unchecked, whose failure would be another test's subject.
    workers = 2 if rng.random() < 0.15 and not (local.tainted and not validate) else 0
    world.log.append(f"epoch {local_name}<-{remote_name} validate={validate} limit={limit} "
                     f"workers={workers}")
    try:
        ds = StreamingDataset(remote=str(remote.path), local=str(local.path),
                              validate_hash=validate, cache_limit=cache_limit)
    except CacheOriginError:
        assert local.remote not in (None, str(remote.path)), world.log
        return
    assert local.remote in (None, str(remote.path)), world.log
    local.remote = str(remote.path)
    local.synced = remote.ids
    # A file corrupted in place and read without validate_hash may give wrong data or a
    # typed error, by design: nothing asked for hashes. Everything else must be exact.
    unchecked = local.tainted and not validate
    try:
        served = []
        for sample in DataLoader(ds, batch_size=None, num_workers=workers) if workers else ds:
            assert unchecked or (sample["payload"] == sample["id"]).all(), world.log
            served.append(int(sample["id"]))
        if workers:
            served.sort()  # the workers' samples interleave
    except UNCHECKED_ERRORS:
        assert unchecked, world.log
        return
    finally:
        ds.close()
    assert unchecked or served == remote.ids, world.log
    local.tainted = unchecked


def _limit(remote: Path, kind: str) -> int:
    """A cache_limit the plan fits in: about half the dataset, or all of it, with room for the
    largest shard in flight and the index."""
    ix = read_index(remote / "index.json")
    raw, zipped = np.asarray(ix.raw_bytes), np.asarray(ix.zip_bytes)
    largest = int((raw + zipped).max()) + 4096
    index = (remote / "index.json").stat().st_size + 4096
    body = int(raw.sum()) if kind == "large" else int(raw.sum()) // 2
    return body + 3 * largest + index


def offline_epoch(world: World, local_name: str) -> None:
    """An epoch of the folder's remote while that remote is gone: served exactly from a
    complete local copy of the version last fetched, or refused with the remote's
    StorageError."""
    local = world.locals[local_name]
    name = next((n for n, r in world.remotes.items() if str(r.path) == local.remote), None)
    if name is None or local.tainted:
        return
    remote = world.remotes[name]
    world.log.append(f"offline epoch {local_name}<-{name}")
    hidden = remote.path.with_name(remote.path.name + ".away")
    remote.path.rename(hidden)
    try:
        ds = StreamingDataset(remote=str(remote.path), local=str(local.path))
    except StorageError:
        return
    finally:
        if not remote.path.exists():  # a failed start must not create the remote's folder
            hidden.rename(remote.path)
    try:
        assert [int(sample["id"]) for sample in ds] == local.synced, world.log
    finally:
        ds.close()


def damage(world: World, local_name: str) -> None:
    """Delete, truncate or flip a byte of one cached file."""
    rng = world.rng
    local = world.locals[local_name]
    files = sorted(p for p in local.path.rglob("shard.*") if p.is_file())
    if not files:
        return
    victim = rng.choice(files)
    how = rng.choice(["delete", "truncate", "flip"])
    world.log.append(f"damage {local_name}: {how} {victim.name}")
    if how == "delete":
        victim.unlink()
    elif how == "truncate":
        with open(victim, "r+b") as f:
            f.truncate(rng.randrange(0, max(victim.stat().st_size, 1)))
    else:
        data = bytearray(victim.read_bytes())
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            victim.write_bytes(bytes(data))
            local.tainted = True


def wipe(world: World, local_name: str) -> None:
    """Remove the whole local folder (a user's clean-up): it may then cache any remote."""
    local = world.locals[local_name]
    world.log.append(f"wipe {local_name}")
    shutil.rmtree(local.path, ignore_errors=True)
    local.remote = None
    local.tainted = False
    local.synced = None


def run(seed: int, root: Path, deadline: float) -> None:
    rng = random.Random(seed)
    world = World(rng, {n: Remote(root / f"remote-{n}") for n in ("a", "b")},
                  {n: Local(root / f"local-{n}") for n in ("x", "y")})
    world.log.append(f"seed {seed}")
    for _ in range(STEPS):
        if time.monotonic() > deadline:
            return
        op = rng.choices(["write", "epoch", "damage", "wipe", "offline"],
                         weights=[2, 6, 3, 1, 1])[0]
        if op == "write":
            write(world, rng.choice("ab"))
        elif op == "epoch":
            epoch(world, rng.choice("xy"), rng.choice("ab"))
        elif op == "damage":
            damage(world, rng.choice("xy"))
        elif op == "wipe":
            wipe(world, rng.choice("xy"))
        else:
            offline_epoch(world, rng.choice("xy"))


@pytest.mark.parametrize("seed", SEEDS)
def test_every_sample_served_is_what_the_remote_holds(seed: int, tmp_path: Path) -> None:
    run(seed, tmp_path, time.monotonic() + DEADLINE / len(SEEDS))
