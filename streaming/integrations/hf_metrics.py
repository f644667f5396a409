"""Log loader metrics from a Hugging Face Trainer run: `callbacks=[StreamingMetricsCallback()]`
(StreamingTrainer's loader is found by itself)."""

from __future__ import annotations

from typing import Any

from streaming.errors import require
from streaming.integrations.metrics_source import MetricsSource, find_source, prefixed

require("transformers", feature="streaming.integrations.hf_metrics", extra="hf-trainer")

from transformers import (  # noqa: E402
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)


class StreamingMetricsCallback(TrainerCallback):
    """At every Trainer log (`logging_steps`), add `loader.metrics()` (keys under `prefix`)
    to the logged values, so every reporter (and `state.log_history`) gets them.

    Args:
        loader: the StreamingDataLoader (default: the trainer's training loader).
        prefix: put before every key.
    """

    def __init__(self, loader: MetricsSource | None = None, prefix: str = "data/") -> None:
        self.loader, self.prefix = loader, prefix

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        source = find_source(self.loader, kwargs.get("train_dataloader"))
        if source is None or logs is None:
            return
        metrics = prefixed(source, self.prefix)
        logs.update(metrics)
        if state.log_history:
            state.log_history[-1].update(metrics)
