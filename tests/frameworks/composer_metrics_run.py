"""Child process of test_metrics_callbacks: a Composer Trainer over our loader with the metrics
callback logging every 5 batches into an in-memory logger; prints the logged sample counts as
JSON on its last line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from composer import Trainer
from composer.loggers import InMemoryLogger
from composer.models import ComposerModel

from streaming import StreamingDataLoader, StreamingDataset
from streaming.integrations.composer_metrics import StreamingMetricsCallback
from tests.dataset.conftest import write_ids

SAMPLES, BATCH = 96, 4


class Tiny(ComposerModel):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def forward(self, batch):
        return self.layer(batch["id"].float().unsqueeze(1))

    def loss(self, outputs, batch):
        return outputs.pow(2).mean()


def main(folder: Path) -> None:
    data = write_ids(folder / "src", SAMPLES)
    loader = StreamingDataLoader(StreamingDataset(local=str(data), batch_size=BATCH),
                                 batch_size=BATCH)
    memory = InMemoryLogger()
    model = Tiny()
    trainer = Trainer(model=model, train_dataloader=loader, max_duration="1ep",
                      optimizers=torch.optim.SGD(model.parameters(), lr=0.0),
                      callbacks=[StreamingMetricsCallback(every=5)], loggers=[memory],
                      device="cpu", progress_bar=False)
    trainer.fit()
    print(json.dumps([value for _, value in memory.data["data/samples"]]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
