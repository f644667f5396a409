"""Log loader metrics from a Composer run: `Trainer(callbacks=[StreamingMetricsCallback()])`."""

from __future__ import annotations

from streaming.errors import require
from streaming.integrations.metrics_source import MetricsSource, find_source, prefixed

require("composer", feature="streaming.integrations.composer_metrics", extra="composer",
        package="mosaicml")

from composer.core import Callback, State  # noqa: E402
from composer.loggers import Logger  # noqa: E402


class StreamingMetricsCallback(Callback):
    """Every `every` batches, log `loader.metrics()` (keys under `prefix`) through Composer's
    logger.

    Args:
        loader: the StreamingDataLoader (default: the state's training dataloader).
        every: batches between two logs.
        prefix: put before every key.
    """

    def __init__(self, loader: MetricsSource | None = None, every: int = 50,
                 prefix: str = "data/") -> None:
        self.loader, self.every, self.prefix = loader, max(int(every), 1), prefix

    def batch_end(self, state: State, logger: Logger) -> None:
        if int(state.timestamp.batch) % self.every:
            return
        source = find_source(self.loader, state.dataloader)
        if source is not None:
            logger.log_metrics(prefixed(source, self.prefix))
