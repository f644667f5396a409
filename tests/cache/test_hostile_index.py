"""A remote is data, never authority over the machine: indexes planted in a remote (a local-folder
remote and a bucket on the loopback S3 server) with hostile names (absolute, `..`, backslashes,
NUL bytes, very long names, duplicates, our own bookkeeping names, side files that climb out)
and cache folders with symbolic links pointing elsewhere must leave every file outside `local`
exactly as it was, and fail with a typed error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.errors import IndexFileError, StreamingError
from tests.support.canary import snapshot
from tests.support.datasets import upload_dir, write_ids

Mutation = Callable[[dict, Path], None]


def _raw(k: int) -> Callable[[dict, str], None]:
    def set_name(document: dict, name: str) -> None:
        document["shards"][k]["raw_data"]["basename"] = name
    return set_name


def _zip(document: dict, name: str) -> None:
    document["shards"][0]["zip_data"]["basename"] = name


def _lengths(document: dict, name: str) -> None:
    files = [{"basename": f"shard.{k:05d}.mds.lengths", "bytes": 4 * shard["samples"]}
             for k, shard in enumerate(document["shards"])]
    files[0]["basename"] = name
    document["sample_lengths"] = {"dtype": "<u4", "files": files}


def _duplicate(document: dict, canary: Path) -> None:
    document["shards"][1]["raw_data"] = dict(document["shards"][0]["raw_data"])


# name -> (where the name goes, the name given the canary folder)
HOSTILE: dict[str, tuple[Callable[[dict, str], None], Callable[[Path], str]]] = {
    "absolute": (_raw(0), lambda canary: str(canary / "victim.txt")),
    "absolute zip": (_zip, lambda canary: str(canary / "victim.txt")),
    "dotdot": (_raw(0), lambda canary: "../../canary/victim.txt"),
    "dotdot inside": (_raw(1), lambda canary: "sub/../../../canary/victim.txt"),
    "dotdot zip": (_zip, lambda canary: "../../canary/victim.txt"),
    "backslashes": (_raw(0), lambda canary: "..\\..\\canary\\victim.txt"),
    "nul byte": (_raw(0), lambda canary: "shard.00000.mds\x00../../canary/victim.txt"),
    "very long": (_raw(0), lambda canary: "x" * 300 + ".mds"),
    "index.json": (_raw(0), lambda canary: "index.json"),
    "part index.json": (_raw(0), lambda canary: "part0/index.json"),
    "origin record": (_raw(0), lambda canary: ".streaming-origin.json"),
    "hidden lock": (_raw(0), lambda canary: ".streaming-origin.lock"),
    "not normal": (_raw(0), lambda canary: "./shard.00000.mds"),
    "side file climbs": (_lengths, lambda canary: "../../canary/victim.txt"),
    "side file absolute": (_lengths, lambda canary: str(canary / "victim.txt")),
}


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """tmp/canary (files that must never change), tmp/source (a clean zstd dataset),
    tmp/work/local (the cache); the remote is tmp/remote or a bucket."""
    canary = tmp_path / "canary"
    (canary / "sub").mkdir(parents=True)
    for name in ("victim.txt", "shard.00000.mds", "shard.00000.mds.zstd", "index.json",
                 "sub/victim2.txt"):
        (canary / name).write_bytes(b"precious " * 40)
    source = write_ids(tmp_path / "source", 60, size_limit=400, compression="zstd",
                       hashes=["xxh64"])
    (tmp_path / "work").mkdir()
    return {"root": tmp_path, "canary": canary, "source": source,
            "local": tmp_path / "work" / "local"}


def _plant(tree: dict[str, Path], mutate: Callable[[dict], None], target: Path) -> None:
    """Copy the clean dataset to folder `target` with its index changed by `mutate`."""
    target.mkdir(parents=True, exist_ok=True)
    for path in tree["source"].iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    document = json.loads((target / "index.json").read_text())
    mutate(document)
    (target / "index.json").write_text(json.dumps(document))


def _read_all(remote: str, local: Path) -> list[int]:
    ds = StreamingDataset(remote=remote, local=str(local), batch_size=4)
    try:
        return sorted(int(s["id"]) for s in ds)
    finally:
        ds.close()


def _case(name: str) -> Callable[[dict], None]:
    where, value = HOSTILE[name]
    return lambda canary: (lambda doc: where(doc, value(canary)))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_name_in_a_folder_remote_touches_nothing_outside_local(tree, name) -> None:
    remote = tree["root"] / "remote"
    _plant(tree, _case(name)(tree["canary"]), remote)
    before = snapshot(tree["root"], tree["local"])
    with pytest.raises(IndexFileError, match=r"basename"):
        _read_all(str(remote), tree["local"])
    assert snapshot(tree["root"], tree["local"]) == before


def test_a_duplicate_name_is_refused_before_anything_is_removed(tree) -> None:
    remote = tree["root"] / "remote"
    _plant(tree, lambda doc: _duplicate(doc, tree["canary"]), remote)
    before = snapshot(tree["root"], tree["local"])
    with pytest.raises(StreamingError, match="also named"):
        _read_all(str(remote), tree["local"])
    assert snapshot(tree["root"], tree["local"]) == before


@pytest.mark.slow
@pytest.mark.parametrize("name", ["absolute", "dotdot", "dotdot zip", "side file climbs",
                                  "index.json"])
def test_a_hostile_name_in_a_bucket_touches_nothing_outside_local(s3_env, tree, name) -> None:
    staged = tree["root"] / "staged"
    _plant(tree, _case(name)(tree["canary"]), staged)
    client = s3_env.client()
    bucket = s3_env.make_bucket()
    upload_dir(client, bucket, "data", staged)
    before = snapshot(tree["root"], tree["local"])
    with pytest.raises(IndexFileError, match=r"basename"):
        _read_all(f"s3://{bucket}/data", tree["local"])
    assert snapshot(tree["root"], tree["local"]) == before


def test_a_planted_local_index_is_not_followed_by_the_origin_check(tree) -> None:
    """A cache folder whose own index.json (the one last fetched) names files outside it: the
    origin check compares old and new entries and must not delete what the old one names."""
    remote = tree["root"] / "remote"
    _plant(tree, lambda doc: None, remote)
    local = tree["local"]
    local.mkdir()
    planted = json.loads((remote / "index.json").read_text())
    planted["shards"][0]["raw_data"]["basename"] = str(tree["canary"] / "victim.txt")
    planted["shards"][1]["raw_data"]["basename"] = "../../canary/sub/victim2.txt"
    (local / "index.json").write_text(json.dumps(planted))
    before = snapshot(tree["root"], local)
    assert _read_all(str(remote), local) == list(range(60))
    assert snapshot(tree["root"], local) == before


def test_a_part_folder_linked_elsewhere_is_refused(tree) -> None:
    """`local/part0` is a symbolic link to the canary folder, and the remote's index names
    `part0/shard.00000.mds`: removing or writing it would reach outside `local`."""
    remote = tree["root"] / "remote"

    def into_part(doc: dict) -> None:
        for shard in doc["shards"]:
            for key in ("raw_data", "zip_data"):
                shard[key]["basename"] = "part0/" + shard[key]["basename"]

    _plant(tree, into_part, remote)
    (remote / "part0").mkdir()
    for path in remote.glob("shard.*"):
        path.rename(remote / "part0" / path.name)
    tree["local"].mkdir()
    (tree["local"] / "part0").symlink_to(tree["canary"], target_is_directory=True)
    before = snapshot(tree["root"], tree["local"])
    before_canary = snapshot(tree["canary"], tree["root"] / "none")
    with pytest.raises(StreamingError, match="outside"):
        _read_all(str(remote), tree["local"])
    assert snapshot(tree["root"], tree["local"]) == before
    assert snapshot(tree["canary"], tree["root"] / "none") == before_canary


def test_a_shard_file_linked_elsewhere_is_never_written_through(tree) -> None:
    """A cached shard that is a symbolic link to a file outside `local`: whatever happens, that
    file keeps its bytes (the link is refused, or replaced by a real download)."""
    remote = tree["root"] / "remote"
    _plant(tree, lambda doc: None, remote)
    local = tree["local"]
    assert _read_all(str(remote), local) == list(range(60))
    for path in local.glob("shard.00000.mds*"):
        path.unlink()
        path.symlink_to(tree["canary"] / path.name)
    before = snapshot(tree["canary"], tree["root"] / "none")
    try:
        assert _read_all(str(remote), local) == list(range(60))
    except StreamingError as exc:
        assert "outside" in str(exc)
    assert snapshot(tree["canary"], tree["root"] / "none") == before
