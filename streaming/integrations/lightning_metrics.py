"""Log loader metrics from a Lightning run: `Trainer(callbacks=[StreamingMetrics()])`."""

from __future__ import annotations

from typing import Any

from streaming.errors import require
from streaming.integrations.metrics_source import MetricsSource, find_source, prefixed

require("lightning", feature="streaming.integrations.lightning_metrics", extra="lightning")

import lightning as L  # noqa: E402


class StreamingMetrics(L.Callback):
    """Every `every` training batches, send `loader.metrics()` (keys under `prefix`) to the
    trainer's loggers.

    Args:
        loader: the StreamingDataLoader (default: the trainer's training loader).
        every: training batches between two logs.
        prefix: put before every key.
    """

    def __init__(self, loader: MetricsSource | None = None, every: int = 50,
                 prefix: str = "data/") -> None:
        self.loader, self.every, self.prefix = loader, max(int(every), 1), prefix

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        if (batch_idx + 1) % self.every:
            return
        source = find_source(self.loader, trainer.train_dataloader)
        if source is None:
            return
        metrics = prefixed(source, self.prefix)
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)
