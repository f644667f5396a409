"""Issue 48 items 2 and 3: a name is a name. A percent-encoded name (`%2e%2e/...`) is never
URL-decoded by a folder or `file://` remote, so it cannot climb out of it; over HTTP it asks
for the object of that very name; a shard that is a symbolic link leading out of a folder
remote is refused; `split` can never put the cache folder outside `local`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming import Stream, StreamingDataset
from streaming.errors import PlanError, StreamingError, UnsafePathError
from tests.security.conftest import SAMPLES, Tree, clean_dataset, edit_index, read_epoch


def _climbing_name(tree: Tree) -> str:
    """`%2e%2e/canary/victim.txt`: decoded relative to the remote folder tmp/source, it
    would name tmp/canary/victim.txt."""
    return "%2e%2e/canary/victim.txt"


@pytest.mark.parametrize("which", ["raw", "zip"])
def test_a_percent_encoded_name_is_never_decoded(tree: Tree, publish, which: str) -> None:
    source = clean_dataset(tree.root / "source", compression=None if which == "raw" else "zstd")
    victim = (tree.canary / "victim.txt").read_bytes()

    def climb(document: dict) -> None:
        entry = document["shards"][0]["raw_data" if which == "raw" else "zip_data"]
        entry["basename"] = _climbing_name(tree)
        entry["bytes"] = len(victim)

    edit_index(source, climb)
    remote = publish(source)
    before = tree.before()
    with pytest.raises(StreamingError) as caught:
        read_epoch(remote, tree.local)
    assert "2e%2" in str(caught.value)  # the name as written (percent-encoded on the wire)
    tree.assert_untouched(before)
    copied = [p for p in tree.local.rglob("*") if p.is_file() and p.read_bytes() == victim]
    assert not copied, f"the victim was copied into the cache: {copied}"


def test_a_unicode_and_a_percent_name_are_read_over_every_remote(tree: Tree, publish) -> None:
    """Names that need encoding on the wire (and must not be decoded on disk) are read."""
    source = clean_dataset(tree.root / "source", compression=None)
    renames = {0: "shard %2e été.mds", 1: "part/x%00y.mds"}

    def rename(document: dict) -> None:
        for k, name in renames.items():
            entry = document["shards"][k]["raw_data"]
            (source / name).parent.mkdir(exist_ok=True)
            os.rename(source / entry["basename"], source / name)
            entry["basename"] = name

    edit_index(source, rename)
    assert read_epoch(publish(source), tree.local) == list(range(SAMPLES))


@pytest.mark.parametrize("kind", ["folder", "file"])
@pytest.mark.parametrize("which", ["raw", "zip", "index"])
def test_a_shard_linked_out_of_a_folder_remote_is_refused(tree: Tree, kind: str,
                                                          which: str) -> None:
    source = clean_dataset(tree.root / "source", compression=None if which == "raw" else "zstd")
    name = {"raw": "shard.00000.mds", "zip": "shard.00000.mds.zstd", "index": "index.json"}[which]
    (tree.canary / name).write_bytes((source / name).read_bytes())  # same size: only a link
    (source / name).unlink()
    (source / name).symlink_to(tree.canary / name)
    before = tree.before()
    remote = str(source) if kind == "folder" else f"file://{source}"
    with pytest.raises(UnsafePathError, match="outside"):
        read_epoch(remote, tree.local)
    tree.assert_untouched(before)
    assert not (tree.local / name).exists()


@pytest.mark.parametrize("split", ["../x", "../../canary", "/abs/split", "a/../../b", "a\\b",
                                   "", ".", "a//b", "a\x00b"])
def test_a_split_that_leaves_local_is_refused(tree: Tree, split: str) -> None:
    source = clean_dataset(tree.root / "source" / "train")
    before = tree.before()
    with pytest.raises(PlanError, match="split"):
        Stream(remote=str(source.parent), local=str(tree.local), split=split)
    with pytest.raises(PlanError, match="split"):
        StreamingDataset(remote=str(source.parent), local=str(tree.local), split=split,
                         batch_size=4)
    tree.assert_untouched(before)


def test_a_plain_split_still_reads(tree: Tree) -> None:
    source = clean_dataset(tree.root / "source" / "train")
    ids = read_epoch(str(source.parent), tree.local, split="train/")
    assert ids == list(range(SAMPLES))
    assert Path(tree.local / "train" / "index.json").is_file()
