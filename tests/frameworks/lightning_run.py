"""A tiny Lightning training run over a StreamingDataset (started by tests/frameworks).

Each rank appends the `id`s of every batch its training_step receives to <out>/rank<r>.jsonl.
The dataset is built in the DataModule's train_dataloader, inside the training processes.
Classes live at module level so ddp_spawn can pickle them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import lightning as L
import torch

from streaming import StreamingDataLoader, StreamingDataset


class Data(L.LightningDataModule):
    def __init__(self, data: str, batch_size: int, workers: int) -> None:
        super().__init__()
        self.data, self.batch_size, self.workers = data, batch_size, workers

    def train_dataloader(self) -> StreamingDataLoader:
        dataset = StreamingDataset(local=self.data, shuffle=True, batch_size=self.batch_size)
        return StreamingDataLoader(dataset, batch_size=self.batch_size, num_workers=self.workers)


class Tiny(L.LightningModule):
    def __init__(self, out: str) -> None:
        super().__init__()
        self.out = Path(out)
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        with open(self.out / f"rank{self.global_rank}.jsonl", "a") as f:
            f.write(json.dumps({"epoch": self.current_epoch, "ids": batch["id"].tolist()}) + "\n")
        return self.layer(batch["id"].float().unsqueeze(1)).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--strategy", default="auto")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--checkpoint-every", type=int, default=None, help="train steps")
    p.add_argument("--resume", default=None, help="checkpoint to resume from")
    args = p.parse_args()

    from lightning.pytorch.callbacks import ModelCheckpoint

    callbacks = []
    if args.checkpoint_every:
        callbacks.append(ModelCheckpoint(dirpath=Path(args.out) / "ckpt", filename="{step}",
                                         save_top_k=-1, every_n_train_steps=args.checkpoint_every))
    trainer = L.Trainer(accelerator="cpu", devices=args.devices, strategy=args.strategy,
                        max_epochs=args.epochs, enable_progress_bar=False, logger=False,
                        enable_model_summary=False, enable_checkpointing=bool(callbacks),
                        callbacks=callbacks, num_sanity_val_steps=0)
    trainer.fit(Tiny(args.out), datamodule=Data(args.data, args.batch_size, args.workers),
                ckpt_path=args.resume)
    return 0


if __name__ == "__main__":
    sys.exit(main())
