"""A warning raised while a command runs reaches the user as one plain line of the command's
output, not as Python's `path.py:104: UserWarning: ...` with the offending source line."""

from __future__ import annotations

from pathlib import Path

import pytest

from writers.mds import MDSWriter

CONFIG = """
streams:
  - {local: web, proportion: 1.0}
batch_size: 8
shuffle: true
shuffle_block_size: 100
epoch_size: 1000
topology: {nodes: 2, ranks_per_node: 2, workers_per_rank: 2}
"""


@pytest.mark.parametrize("jobs", ["1", "2"])  # 2: nodes simulated in child processes too
def test_plan_shows_a_warning_as_a_plain_line(cli, tmp_path: Path, jobs: str):
    with MDSWriter(out=tmp_path / "web", columns={"id": "int"}, size_limit=1 << 20) as writer:
        for i in range(5000):  # one shard of 5000 samples, longer than the shuffle block
            writer.write({"id": i})
    config = tmp_path / "mix.yaml"
    config.write_text(CONFIG)
    ran = cli("plan", config, "--png", tmp_path / "mix.png", "--jobs", jobs)
    assert ran.code == 0, ran.err
    assert "epoch size" in ran.out
    lines = ran.err.splitlines()
    assert lines == ["streaming plan: warning: Shuffle block size was smaller than shard size "
                     "for some shards: " + lines[0].split("for some shards: ", 1)[1]]
    assert "shuffle_block_size=100" in lines[0] and "UserWarning" not in ran.err

    if jobs == "1":
        verbose = cli("--verbose", "plan", config, "--png", tmp_path / "mix.png")
        assert "UserWarning" in verbose.err  # --verbose keeps Python's form, for a bug report
