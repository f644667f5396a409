"""The loader-metrics callbacks in real training runs: Lightning's Trainer logs them through its
CSV logger. (Composer's, through its in-memory logger, is checked in the Composer run of
tests/clients/test_composer.py.)"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from streaming import StreamingDataLoader, StreamingDataset
from tests.support.datasets import write_ids

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
