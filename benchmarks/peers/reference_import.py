"""The reference's StreamingDataset, for scripts that run inside .bench-venvs/reference.

Its top-level package file also imports its vision extras (torchvision, whose wheel may not
load beside a CPU-only torch), so `streaming.base` is loaded without it, as the parity tests
do. Stdlib-only until the reference itself is imported.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types


def reference_streaming_dataset() -> type:
    """The reference's `streaming.base.StreamingDataset` class."""
    package = types.ModuleType("streaming")
    package.__path__ = [os.path.join(sysconfig.get_paths()["purelib"], "streaming")]
    sys.modules["streaming"] = package
    from streaming.base import StreamingDataset

    return StreamingDataset
