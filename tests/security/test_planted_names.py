"""Issue 48: the adversarial corpus. A clean epoch is traced (every file the run opens for
writing, creates, renames onto or makes as a folder under `local`, seen through Python's audit
hooks); then, for each name it used that another user could predict (everything but the
random temp names), a fresh `local` gets a symbolic link under that name, pointing at a file
outside `local` or at a path that does not exist yet, and a whole epoch runs. Each run must
read every sample or fail with a typed StreamingError, and leave every file outside `local`
as it was (the dangling link's target never created)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from streaming.errors import StreamingError
from tests.security.conftest import SAMPLES, Tree, clean_dataset, read_epoch

RANDOM = re.compile(r"\.\d+\.[0-9a-f]{8}\.tmp$|\.\d+\.\d+\.tmp$")  # pid + token: unpredictable
_watch: list[tuple[str, set[str]]] = []  # (local folder, names seen) while a trace runs


def _hook(event: str, args: tuple) -> None:
    if not _watch or event not in ("open", "os.rename", "os.mkdir", "os.symlink", "os.link"):
        return
    root, seen = _watch[-1]
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        paths = [path] if writes else []
    else:
        paths = [args[1] if event != "os.mkdir" else args[0]]
    for path in paths:
        if isinstance(path, (str, os.PathLike)):
            text = os.path.abspath(os.fspath(path))
            if text.startswith(root + os.sep):
                seen.add(os.path.relpath(text, root))


sys.addaudithook(_hook)


def traced_names(remote: str, local: Path, **options) -> set[str]:
    """The names under `local` a clean epoch writes, creates or renames onto."""
    seen: set[str] = set()
    _watch.append((str(local), seen))
    try:
        assert read_epoch(remote, local, **options) == list(range(SAMPLES))
    finally:
        _watch.pop()
    return seen


def _fresh(tree: Tree) -> None:
    shutil.rmtree(tree.local, ignore_errors=True)
    tree.local.mkdir()


@pytest.mark.parametrize(("compression", "keep_zip"), [("zstd", False), (None, False),
                                                     ("zstd", True)],
                         ids=["zstd", "raw", "zstd-keep_zip"])
def test_a_link_under_every_name_the_cache_creates(tree: Tree, publish, compression, keep_zip):
    remote = publish(clean_dataset(tree.root / "source", compression=compression))
    names = traced_names(remote, tree.local, keep_zip=keep_zip)
    plantable = sorted(n for n in names if not RANDOM.search(n))
    assert {".streaming-origin.lock", ".streaming-node.lock", "index.json"} <= set(plantable)
    assert any(n.endswith(".prep.lock") for n in plantable), plantable
    outcomes = {}
    for name in plantable:
        for dangling in (False, True):
            _fresh(tree)
            target = tree.canary / ("never-created" if dangling else "victim.txt")
            where = tree.local / name
            where.parent.mkdir(parents=True, exist_ok=True)
            where.symlink_to(target)
            before = tree.before()
            try:
                ids = read_epoch(remote, tree.local, keep_zip=keep_zip)
                outcomes[name, dangling] = "read" if ids == list(range(SAMPLES)) else "WRONG"
            except StreamingError as exc:
                outcomes[name, dangling] = type(exc).__name__
            tree.assert_untouched(before)
            assert not (tree.canary / "never-created").exists(), name

    assert "WRONG" not in outcomes.values(), outcomes
