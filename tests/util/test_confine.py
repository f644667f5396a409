"""The guard every create, rename and removal under a cache or dataset folder passes: paths that
resolve inside the folder pass, links and climbs that lead out are refused with
UnsafePathError, and the callers that clear folders (convert's exist_ok, `streaming cache clear`)
refuse before removing anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streaming.errors import UnsafePathError
from streaming.util.confine import confine, remove
from tests.support.datasets import write_ids


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim").write_text("precious")
    return root, outside


def test_paths_inside_pass_and_paths_out_are_refused(folders) -> None:
    root, outside = folders
    assert confine(root, root / "a") == root / "a"
    assert confine(root, root / "sub" / "missing" / "b") == root / "sub" / "missing" / "b"
    (root / "inner").symlink_to(root / "sub", target_is_directory=True)
    assert confine(root, root / "inner" / "c") == root / "inner" / "c"  # a link that stays in
    for path in (root, root / ".." / "outside" / "victim", outside / "victim"):
        with pytest.raises(UnsafePathError, match="outside the folder"):
            confine(root, path)


def test_links_that_lead_out_are_refused_wherever_they_stand(folders) -> None:
    root, outside = folders
    (root / "out_dir").symlink_to(outside, target_is_directory=True)
    (root / "sub" / "out_file").symlink_to(outside / "victim")
    (root / "dangling").symlink_to(outside / "not_yet")
    for path in (root / "out_dir" / "victim", root / "sub" / "out_file", root / "dangling"):
        with pytest.raises(UnsafePathError, match=str(outside)):
            remove(root, path)
    assert (outside / "victim").read_text() == "precious"
    assert (root / "sub" / "out_file").is_symlink()


def test_a_root_reached_through_a_link_is_still_the_root(folders, tmp_path: Path) -> None:
    root, _ = folders
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    (root / "f").write_text("x")
    assert remove(alias, alias / "f") and not (root / "f").exists()
    assert not remove(alias, alias / "f")  # already gone


def test_convert_exist_ok_refuses_a_linked_part_folder_before_removing_anything(
        tmp_path: Path, folders) -> None:
    from writers.convert import convert

    _, outside = folders
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"id": {i}}}\n' for i in range(20)))
    out = tmp_path / "out"
    convert(str(source), str(out), workers=2)
    (out / "part99999").symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(UnsafePathError, match="part99999"):
        convert(str(source), str(out), workers=2, exist_ok=True, resume=False)
    assert sorted(p.name for p in out.iterdir()) == before
    assert (outside / "victim").read_text() == "precious"


def test_cache_clear_refuses_a_shard_link_that_leads_out(tmp_path: Path, folders) -> None:
    from streaming.cache.folder.cache_marker import mark_cache

    _, outside = folders
    cache = write_ids(tmp_path / "cache", 10)
    mark_cache(cache)
    (cache / "shard.99999.mds").symlink_to(outside / "victim")
    run = subprocess.run([sys.executable, "-m", "streaming.cli", "cache", "clear",
                          str(cache)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "outside the folder" in run.stderr
    assert (outside / "victim").read_text() == "precious"
