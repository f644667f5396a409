"""The writer side stands on the format layer only: no import of the reader's packing, its
options are real parameters, and every writer checks compression and hashes the same way."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from streaming.errors import FormatError
from writers import MDSWriter
from writers.convert import convert
from writers.limits import DEFAULT_SIZE_LIMIT
from writers.text_writers import JSONWriter

WRITERS = Path(__file__).resolve().parents[2] / "writers"


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_writers_do_not_import_packing() -> None:
    offenders = {str(p.relative_to(WRITERS)): sorted(m for m in _imported_modules(p)
                                                     if m.startswith("streaming.packing"))
                 for p in WRITERS.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_mds_writer_options_are_parameters() -> None:
    params = inspect.signature(MDSWriter.__init__).parameters
    assert params["retry"].default == 2
    assert params["lengths"].default is None
    assert params["size_limit"].default == DEFAULT_SIZE_LIMIT == 1 << 26
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())


@pytest.mark.parametrize("make", [
    lambda out, **kw: MDSWriter(columns={"a": "int"}, out=out, **kw),
    lambda out, **kw: JSONWriter(columns={"a": "int"}, out=out, **kw),
    lambda out, **kw: convert([{"a": 1}], out, **kw),
])
def test_every_writer_checks_options_alike(make, tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="'md7', 'sha9'"):
        make(tmp_path / "h", hashes=["md5", "md7", "sha9"])
    with pytest.raises(FormatError, match="unknown compression 'lz4'"):
        make(tmp_path / "c", compression="lz4")
    assert not (tmp_path / "h").exists() or not any((tmp_path / "h").iterdir())
