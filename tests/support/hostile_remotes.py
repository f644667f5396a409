"""Hostile remotes for benchmarks/fuzz_readers.py: bombs, floods, trickles, planted links,
encoded and linked names, each read for a whole epoch by a child process under a wall-clock
limit and a file-size limit, with every file outside the cache snapshotted before and after.

Each scenario builds its dataset under `root/remote` (serving it over HTTP when asked) and
names what the reader passes to StreamingDataset. The child prints one JSON line: `data`
(every sample right), `wrong` (a sample differs), `typed` (a StreamingError) or `untyped`;
no line within the limit is a hang, a child killed by a signal (the file-size limit) is
untyped.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from tests.support.canary import snapshot
from tests.support.hostile_http import HostileHTTPServer

SAMPLES = 40
CHILD_SECONDS = 60.0
FILE_LIMIT = 1 << 30  # the most bytes any one file of the child may reach
MiB = 1 << 20


@dataclass
class Read:
    """What the child reads: `remote`, StreamingDataset options and environment variables."""

    remote: str
    options: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    local: str = "local"


@dataclass
class Result:
    """One scenario's outcome."""

    name: str
    result: str  # data, wrong, typed, untyped, hang
    touched: list[str]
    detail: str


def _dataset(folder: Path, compression: str | None = "zstd") -> Path:
    from tests.support.datasets import write_ids

    return write_ids(folder, SAMPLES, size_limit=400, compression=compression,
                     hashes=["xxh64"])


def _edit(folder: Path, edit: Callable[[dict], None]) -> None:
    document = json.loads((folder / "index.json").read_text())
    edit(document)
    (folder / "index.json").write_text(json.dumps(document))


@functools.lru_cache(maxsize=2)
def _bomb(sized: bool, size: int = 2 << 30) -> bytes:
    enc = zstandard.ZstdCompressor(level=3).compressobj(size=size if sized else -1)
    block = bytes(MiB)
    return b"".join(enc.compress(block) for _ in range(size // MiB)) + enc.flush()


def _plant_bomb(folder: Path, sized: bool) -> None:
    body = _bomb(sized)

    def edit(document: dict) -> None:
        entry = document["shards"][0]
        (folder / entry["zip_data"]["basename"]).write_bytes(body)
        entry["zip_data"]["bytes"] = len(body)
        entry["zip_data"]["hashes"] = {}

    _edit(folder, edit)


class Scenarios:
    """Every hostile scenario, built in `root` (one HTTP server serves `root/served`)."""

    def __init__(self, root: Path, server: HostileHTTPServer) -> None:
        self.root, self.server = root, server

    def _serve(self, folder: Path) -> str:
        name = hashlib.sha1(str(folder).encode()).hexdigest()[:12]
        shutil.copytree(folder, self.server.root / name, symlinks=True)
        return f"{self.server.endpoint}/{name}"

    def all(self) -> dict[str, Callable[[Path], Read]]:
        """Scenario name -> builder(scenario folder) -> what to read."""
        out: dict[str, Callable[[Path], Read]] = {}
        for sized in (True, False):
            tag = "sized" if sized else "unsized"
            out[f"zstd bomb ({tag}), folder"] = lambda d, s=sized: self._bomb(d, s, "folder")
            out[f"zstd bomb ({tag}), file://"] = lambda d, s=sized: self._bomb(d, s, "file")
            out[f"zstd bomb ({tag}), http"] = lambda d, s=sized: self._bomb(d, s, "http")
        out.update({
            "shard body 1 GiB over 400 B, folder": lambda d: self._long_body(d, False),
            "shard body 1 GiB over 400 B, http": lambda d: self._long_body(d, True),
            "flooding index.json, http": lambda d: self._attack(d, "index.json", "flood"),
            "flooding shard, http": lambda d: self._attack(d, "shard.00001.mds.zstd", "flood"),
            "trickling index.json, http": lambda d: self._attack(d, "index.json", "trickle"),
            "trickling shard, http": lambda d: self._attack(d, "shard.00001.mds.zstd",
                                                            "trickle"),
            "re-encoded shard, digests kept, folder": self._re_encoded,
            "percent-encoded name climbing out, folder": lambda d: self._percent(d, "folder"),
            "percent-encoded name climbing out, file://": lambda d: self._percent(d, "file"),
            "shard linked out of the remote, folder": self._linked_shard,
            "split climbing out of local": lambda d: Read(str(_dataset(d / "remote" / "t")),
                                                          {"split": "../x"}),
            "deeply nested index.json": self._nested,
            "absurd sample count": self._absurd,
        })
        for lock in (".streaming-origin.lock", ".streaming-node.lock",
                     ".shard.00000.mds.prep.lock", ".shard.00000.mds.lock"):
            for dangling in (False, True):
                how = "dangling link" if dangling else "link to a file"
                out[f"{how} at {lock}"] = lambda d, n=lock, x=dangling: self._lock(d, n, x)
        return out

    def _remote(self, folder: Path, kind: str) -> str:
        return {"folder": str(folder), "file": f"file://{folder}"}.get(kind) or self._serve(folder)

    def _bomb(self, d: Path, sized: bool, kind: str) -> Read:
        folder = _dataset(d / "remote")
        _plant_bomb(folder, sized)
        return Read(self._remote(folder, kind))

    def _long_body(self, d: Path, http: bool) -> Read:
        folder = _dataset(d / "remote", None)
        with open(folder / "shard.00000.mds", "wb") as out:
            out.truncate(1 << 30)  # sparse: a 1 GiB body for a shard of 400 bytes
        return Read(self._remote(folder, "http" if http else "folder"))

    def _attack(self, d: Path, name: str, attack: str) -> Read:
        url = self._serve(_dataset(d / "remote"))
        self.server.attacks[f"{url.rsplit('/', 1)[1]}/{name}"] = attack
        return Read(url, {"download_timeout": 2, "download_retry": 1})

    def _re_encoded(self, d: Path) -> Read:
        from streaming.format.compression import compress, decompress

        folder = _dataset(d / "remote")

        def edit(document: dict) -> None:
            entry = document["shards"][0]
            zipped = folder / entry["zip_data"]["basename"]
            raw = bytearray(decompress("zstd", zipped.read_bytes()))
            at = bytes(raw).index((1).to_bytes(4, "little") * 3)
            raw[at:at + 4] = (7).to_bytes(4, "little")
            body = compress("zstd", bytes(raw))
            zipped.write_bytes(body)
            entry["zip_data"]["bytes"] = len(body)

        _edit(folder, edit)
        return Read(str(folder))

    def _percent(self, d: Path, kind: str) -> Read:
        folder = _dataset(d / "remote", None)
        victim = d / "canary" / "victim.txt"
        _edit(folder, lambda doc: doc["shards"][0]["raw_data"].update(
            basename="%2e%2e/canary/victim.txt", bytes=victim.stat().st_size))
        return Read(self._remote(folder, kind))

    def _linked_shard(self, d: Path) -> Read:
        folder = _dataset(d / "remote")
        name = "shard.00000.mds.zstd"
        (d / "canary" / name).write_bytes((folder / name).read_bytes())
        (folder / name).unlink()
        (folder / name).symlink_to(d / "canary" / name)
        return Read(str(folder))

    def _nested(self, d: Path) -> Read:
        folder = d / "remote"
        folder.mkdir()
        (folder / "index.json").write_text("[" * 100_000 + "]" * 100_000)
        return Read(str(folder))

    def _absurd(self, d: Path) -> Read:
        folder = _dataset(d / "remote")
        _edit(folder, lambda doc: doc["shards"][0].update(samples=1_073_741_821))
        return Read(str(folder))

    def _lock(self, d: Path, name: str, dangling: bool) -> Read:
        folder = _dataset(d / "remote", None)
        (d / "local").mkdir()
        target = d / "canary" / ("never-created" if dangling else "victim.txt")
        (d / "local" / name).symlink_to(target)
        return Read(str(folder))


_CHILD = r"""
import json, sys
from streaming import StreamingDataset
from streaming.errors import StreamingError
read = json.loads(sys.argv[1])
try:
    ds = StreamingDataset(remote=read["remote"], local=read["local"], batch_size=4,
                          **{"download_retry": 0, "download_timeout": 10, **read["options"]})
    got = [(int(s["id"]), int(s["payload"][0])) for s in ds]
    ok = got == [(i, i) for i in range(SAMPLES)]
    print(json.dumps({"result": "data" if ok else "wrong", "detail": ""}))
except StreamingError as exc:
    print(json.dumps({"result": "typed", "detail": f"{type(exc).__name__}: {exc}"[:300]}))
except BaseException as exc:
    print(json.dumps({"result": "untyped", "detail": f"{type(exc).__name__}: {exc}"[:300]}))
""".replace("SAMPLES", str(SAMPLES))


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def run_scenario(name: str, build: Callable[[Path], Read], scratch: Path) -> Result:
    """Build scenario `name` in a new folder of `scratch`, read it in a child, classify."""
    d = Path(tempfile.mkdtemp(dir=scratch))
    (d / "canary").mkdir()
    (d / "canary" / "victim.txt").write_bytes(b"precious " * 40)
    try:
        read = build(d)
        local = d / read.local
        before = snapshot(d, local)
        child = json.dumps({"remote": read.remote, "local": str(local), "options": read.options})
        try:
            done = subprocess.run([sys.executable, "-c", _CHILD, child], capture_output=True,
                                  text=True, timeout=CHILD_SECONDS, env={**os.environ, **read.env},
                                  preexec_fn=_limit_files)
            lines = done.stdout.strip().splitlines()
            answer = json.loads(lines[-1]) if lines else {
                "result": "untyped", "detail": f"exit {done.returncode}: {done.stderr[-300:]}"}
        except subprocess.TimeoutExpired:
            answer = {"result": "hang", "detail": f"no answer within {CHILD_SECONDS:g} s"}
        after = snapshot(d, local)
        touched = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        return Result(name, answer["result"], touched, answer["detail"])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_all(scratch: Path) -> list[Result]:
    """Every scenario once, in order."""
    served = scratch / "served"
    served.mkdir()
    with HostileHTTPServer(served, pace=0.5, flood_bytes=1 << 30) as server:
        return [run_scenario(name, build, scratch)
                for name, build in Scenarios(scratch, server).all().items()]
