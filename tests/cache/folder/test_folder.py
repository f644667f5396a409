"""Checks on a stream's `local` and `remote` before anything is written: URLs missing a slash,
a file in the way, a folder this user cannot write (simulated: the tests may run as root), and
folders a failed start created are removed again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming.cache.folder import folder_checks as folder_module
from streaming.cache.folder.folder_checks import check_location, make_folder, remove_created
from streaming.errors import CacheFolderError, LocationError


@pytest.mark.parametrize("value", ["s3:/bucket/x", "s3:bucket/x", "gs:/b", "S3:/b", "file:/x"])
def test_a_url_missing_a_slash_is_refused(value: str) -> None:
    with pytest.raises(LocationError, match="not a valid URL"):
        check_location(value, "remote")


@pytest.mark.parametrize("value", ["s3://bucket/x", "/data/x", "data:set/x", "C:/data", "x"])
def test_urls_and_paths_pass(value: str) -> None:
    check_location(value, "local")


def test_an_unwritable_folder_is_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(folder_module.os, "access", lambda path, mode: False)
    with pytest.raises(CacheFolderError, match=str(tmp_path / "ro")):
        make_folder(tmp_path / "ro")


def test_a_folder_that_cannot_be_created_is_named_and_nothing_is_left(tmp_path: Path,
                                                                       monkeypatch) -> None:
    real = Path.mkdir

    def refuse(self, *args, **kwargs):
        if self.name == "c":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(CacheFolderError, match="Permission denied"):
        make_folder(tmp_path / "a" / "b" / "c")
    assert not (tmp_path / "a").exists()


def test_created_folders_go_only_while_they_hold_nothing_of_the_users(tmp_path: Path) -> None:
    created = make_folder(tmp_path / "x" / "y")
    assert created == [tmp_path / "x" / "y", tmp_path / "x"]
    (tmp_path / "x" / "y" / ".streaming-cache").touch()
    (tmp_path / "x" / "keep.txt").touch()
    remove_created(created)
    assert not (tmp_path / "x" / "y").exists() and (tmp_path / "x" / "keep.txt").exists()
    assert os.listdir(tmp_path / "x") == ["keep.txt"]
