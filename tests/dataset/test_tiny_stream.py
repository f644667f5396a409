"""A stream with fewer samples than canonical nodes: the reference's py1e shuffle refuses it
with a ValueError; we plan it, warn with the reference's phrase, and serve every sample
(docs/from-reference-api.md says why)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from streaming import MDSWriter, StreamingDataset
from tests.parity.test_reference_parity import reference_python, without_reference


def _one_sample(folder: Path) -> Path:
    with MDSWriter(out=folder, columns={"id": "int"}) as writer:
        writer.write({"id": 7})
    return folder


@pytest.mark.parametrize("shuffle", [True, False])
def test_one_sample_over_two_canonical_nodes_is_served_with_a_warning(tmp_path, shuffle):
    remote = _one_sample(tmp_path / "remote")
    with pytest.warns(UserWarning, match="Trying to partition 1 samples over 2 canonical nodes"):
        ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), shuffle=shuffle,
                              num_canonical_nodes=2, batch_size=1)
        assert [int(sample["id"]) for sample in ds] == [7]


def test_the_reference_refuses_it(tmp_path):
    """The difference the docs describe is real: the reference raises a ValueError."""
    python = reference_python()
    if python is None:
        without_reference("the reference implementation's venv is missing")
    remote = _one_sample(tmp_path / "remote")
    script = textwrap.dedent(f"""
        import os, sys, sysconfig, types
        package = types.ModuleType("streaming")  # skip its vision extras (torchvision)
        package.__path__ = [os.path.join(sysconfig.get_paths()["purelib"], "streaming")]
        sys.modules["streaming"] = package
        from streaming.base import StreamingDataset
        ds = StreamingDataset(remote={str(remote)!r}, local={str(tmp_path / "ref")!r},
                              shuffle=True, num_canonical_nodes=2, batch_size=1)
        try:
            list(ds)
        except ValueError as exc:
            print("ValueError:", exc)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-c", script], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=120)
    if done.returncode != 0 and "ValueError" not in done.stdout:
        without_reference(f"{python} could not run: {done.stderr.strip()[-600:]}")
    assert "ValueError: The number of samples assigned to a canonical node is 0" in done.stdout
