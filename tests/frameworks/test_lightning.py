"""PyTorch Lightning over StreamingDataset: ranks placed correctly under Lightning's own
launchers (ddp_spawn, ddp started with plain python), and checkpoints that resume the data
exactly from `ckpt_path` in a new process, alone and under DDP."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.frameworks.helpers import read_batches, run_script
from tests.support.datasets import write_ids

pytest.importorskip("lightning")

SAMPLES, BATCH = 96, 4
TIMEOUT = 240  # seconds per Lightning run (torch's own collective timeout is far longer)


def _train(data: Path, out: Path, *extra: str) -> Path:
    out.mkdir(parents=True)
    run_script("lightning_run.py", ["--data", str(data), "--out", str(out),
                                    "--batch-size", str(BATCH), *extra], timeout=TIMEOUT)
    return out


def _disjoint_and_covering(out: Path, ranks: int) -> list[list[list[int]]]:
    per_rank = [read_batches(out / f"rank{r}.jsonl") for r in range(ranks)]
    seen = [[i for batch in batches for i in batch] for batches in per_rank]
    assert all(len(s) == SAMPLES // ranks for s in seen)
    assert sorted(i for s in seen for i in s) == list(range(SAMPLES))
    return per_rank


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_ids(tmp_path_factory.mktemp("lightning") / "src", SAMPLES)


@pytest.fixture(scope="module")
def single_device_run(data, tmp_path_factory) -> tuple[Path, list[list[int]]]:
    """Two epochs alone with a checkpoint every 8 steps (so mid-epoch 8 and epoch-end 24)."""
    full = _train(data, tmp_path_factory.mktemp("single") / "full", "--workers", "2",
                  "--epochs", "2", "--checkpoint-every", "8")
    batches = read_batches(full / "rank0.jsonl")
    assert len(batches) == 2 * SAMPLES // BATCH
    return full, batches


@pytest.mark.slow
def test_ddp_spawn_and_plain_python_place_ranks_and_resume_exactly(data, tmp_path) -> None:
    """The run under ddp_spawn places ranks; its step-5 checkpoint resumed under ddp started
    with plain python, with DataLoader workers, gives every rank exactly the batches that
    followed, which only holds if that launcher places the ranks the same way. (Workers
    under ddp_spawn are spawned too and each imports Lightning: the spawn run has none.)"""
    full = _train(data, tmp_path / "spawn", "--strategy", "ddp_spawn", "--devices", "2",
                  "--checkpoint-every", "5")
    per_rank = _disjoint_and_covering(full, 2)
    resumed = _train(data, tmp_path / "resumed", "--strategy", "ddp", "--devices", "2",
                     "--workers", "2", "--resume", str(full / "ckpt" / "step=5.ckpt"))
    for rank in range(2):
        assert read_batches(resumed / f"rank{rank}.jsonl") == per_rank[rank][5:]


@pytest.mark.slow
@pytest.mark.parametrize("step", [8, 24], ids=["mid-epoch", "epoch-end"])
def test_single_device_checkpoint_resumes_exactly(data, single_device_run, tmp_path,
                                                  step) -> None:
    full, batches = single_device_run
    resumed = _train(data, tmp_path / "resumed", "--workers", "2", "--epochs", "2",
                     "--resume", str(full / "ckpt" / f"step={step}.ckpt"))
    assert read_batches(resumed / "rank0.jsonl") == batches[step:]
