"""One Composer training run on an MDS dataset through StreamingDataLoader (tests/clients).

`python composer_run.py DATA OUT [--load CKPT]...`: trains a one-weight model for two epochs,
saving checkpoints mid-epoch and on epoch 0's last batch into OUT/ckpt, and at `1ep` into
OUT/ckpt/1ep, and writes
each batch's sample ids, with Composer's epoch and batch counters, as JSON lines to
OUT/batches-rank<R>.jsonl; that run also logs the loader metrics every 5 batches
(StreamingMetricsCallback into an InMemoryLogger) and writes the logged sample counts to
OUT/metrics-rank<R>.json. With `--load`, each given checkpoint is resumed in turn by a new
Trainer (and dataset) of this process, writing OUT/resumed-<name>-rank<R>.jsonl. Started once per
rank, with torch.distributed's launcher variables, for the two-rank runs (gloo).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.clients.helpers import use_standins

use_standins()

from composer import Callback, Event, State, Trainer  # noqa: E402
from composer.callbacks import CheckpointSaver  # noqa: E402
from composer.loggers import InMemoryLogger, Logger  # noqa: E402
from composer.models import ComposerModel  # noqa: E402
from composer.utils import dist  # noqa: E402

from streaming import StreamingDataLoader, StreamingDataset  # noqa: E402
from streaming.integrations.composer_metrics import StreamingMetricsCallback  # noqa: E402

BATCH, WORKERS, MID = 4, 2, 5  # MID: the mid-epoch checkpoint's batch


class Tiny(ComposerModel):
    """One weight trained towards zero on the samples' `x`."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))

    def forward(self, batch: dict) -> torch.Tensor:
        return batch["x"].float() * self.w

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        return outputs.pow(2).mean()


class Recorder(Callback):
    """Appends every training batch's ids and Composer's counters to a JSON-lines file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def after_dataloader(self, state: State, logger: Logger) -> None:
        row = {"epoch": int(state.timestamp.epoch), "batch": int(state.timestamp.batch),
               "ids": state.batch["id"].tolist()}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def savers(folder: Path, per_epoch: int) -> list[Callback]:
    """Checkpoints at batch MID and on epoch 0's last batch, and (a saver of its own: one saver
    writes once per batch count) at the end of epoch 0, `1ep`."""

    def on_batch(state: State, event: Event) -> bool:
        return event == Event.BATCH_CHECKPOINT and int(state.timestamp.batch) in (MID, per_epoch)

    def on_epoch(state: State, event: Event) -> bool:
        return event == Event.EPOCH_CHECKPOINT and int(state.timestamp.epoch) == 1

    return [CheckpointSaver(str(folder), save_interval=on_batch, latest_filename=None),
            CheckpointSaver(str(folder / "1ep"), save_interval=on_epoch, latest_filename=None)]


def trainer(data: Path, record: Path, ckpt: Path | None, load: str | None,
            memory: InMemoryLogger | None = None) -> Trainer:
    ds = StreamingDataset(local=str(data), shuffle=True, shuffle_seed=7, batch_size=BATCH)
    loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=WORKERS)
    per_epoch = len(loader)
    callbacks = [Recorder(record), *(savers(ckpt, per_epoch) if ckpt else [])]
    if memory is not None:
        callbacks.append(StreamingMetricsCallback(every=5))
    return Trainer(model=Tiny(), train_dataloader=loader, max_duration="2ep",
                   callbacks=callbacks, device="cpu", progress_bar=False,
                   log_to_console=False, loggers=[memory] if memory else [], load_path=load)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--load", action="append", default=[])
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's deadline: show stacks
    rank = dist.get_global_rank()
    if not args.load:
        memory = InMemoryLogger()
        trainer(args.data, args.out / f"batches-rank{rank}.jsonl", args.out / "ckpt", None,
                memory).fit()
        logged = [value for _, value in memory.data["data/samples"]]
        (args.out / f"metrics-rank{rank}.json").write_text(json.dumps(logged))
    for ckpt in args.load:
        name = Path(ckpt).name.split("-rank")[0]
        run = trainer(args.data, args.out / f"resumed-{name}-rank{rank}.jsonl", None, ckpt)
        run.fit()
        run.close()


if __name__ == "__main__":
    main()
