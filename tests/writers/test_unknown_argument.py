"""An MDSWriter argument it does not take is refused before anything is written, as the
TypeError Python raises for an unknown keyword and the ValueError the reference raises."""

from __future__ import annotations

import pytest

from streaming import MDSWriter
from streaming.errors import UnknownArgumentError


def test_an_unknown_writer_argument_is_named_with_the_real_ones(tmp_path):
    for kind in (TypeError, ValueError, UnknownArgumentError):
        with pytest.raises(kind, match=r"Invalid Writer argument\(s\): \['min_workers'\]") as info:
            MDSWriter(out=tmp_path / "out", columns={"x": "int"}, min_workers=1)
        assert "max_workers" in str(info.value)  # what the user probably meant
    assert not (tmp_path / "out").exists()
