"""The loader-metrics callbacks in real training runs: Lightning's Trainer logs them through its
CSV logger, Composer's through its in-memory logger."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from streaming import StreamingDataLoader, StreamingDataset
from tests.dataset.conftest import write_ids
from tests.support.clients import child_env, require

SAMPLES, BATCH = 96, 4


def _loader(tmp_path: Path) -> StreamingDataLoader:
    data = write_ids(tmp_path / "src", SAMPLES)
    ds = StreamingDataset(local=str(data), batch_size=BATCH)
    return StreamingDataLoader(ds, batch_size=BATCH)


def test_lightning_logs_loader_metrics(tmp_path):
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import CSVLogger

    from streaming.integrations.lightning_metrics import StreamingMetrics

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def training_step(self, batch, batch_idx):
            return self.layer(batch["id"].float().unsqueeze(1)).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=CSVLogger(tmp_path),
                        callbacks=[StreamingMetrics(every=5)], enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Tiny(), _loader(tmp_path))
    with open(next(tmp_path.rglob("metrics.csv"))) as f:
        rows = list(csv.DictReader(f))
    logged = [r for r in rows if r.get("data/samples")]
    assert [float(r["data/samples"]) for r in logged] == [20.0, 40.0, 60.0, 80.0]
    assert all(float(r["data/samples_per_s"]) > 0 for r in logged)
    assert "data/stream/0/samples" in logged[0] and "data/cache/hits" in logged[0]


def test_composer_logs_loader_metrics(tmp_path):
    """In a child process: Composer needs the torchvision stand-in on its path, which must not
    leak into the other tests of this process (tests/support/clients.py)."""
    require("composer")
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("composer_metrics_run.py")),
                          str(tmp_path)], env=child_env(), capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [20.0, 40.0, 60.0, 80.0]
