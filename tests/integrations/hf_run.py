"""A tiny GPT-2 trained by StreamingTrainer on packed integer tokens (no download, CPU).

Used in-process and as `python -m tests.integrations.hf_run` (a resumed run in a fresh
process). Every forward call's inputs are recorded, so runs can be compared batch for batch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from writers.mds import MDSWriter

VOCAB = 64
PACKING_LENGTH = 32


def write_token_data(out: Path, n: int = 160, seed: int = 0) -> None:
    """`n` samples of 3..19 consecutive token ids (mod VOCAB): an easy pattern to learn."""
    rng = np.random.default_rng(seed)
    with MDSWriter(columns={"tokens": "ndarray:int32"}, out=str(out), lengths="tokens",
                   size_limit=1 << 12) as writer:
        for _ in range(n):
            size, start = int(rng.integers(3, 20)), int(rng.integers(0, VOCAB))
            writer.write({"tokens": ((start + np.arange(size)) % VOCAB).astype(np.int32)})


def tiny_gpt2(attn: str = "sdpa", use_cache: bool = True, dropout: float = 0.0) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=PACKING_LENGTH, n_embd=32, n_layer=2,
                        n_head=2, resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                        bos_token_id=None, eos_token_id=None, use_cache=use_cache)
    model = GPT2LMHeadModel(config)
    model.set_attn_implementation(attn)
    return model


def record_forward(model: Any) -> list[dict[str, Any]]:
    """Replace `model.forward` by a wrapper that keeps a copy of every call's inputs."""
    calls: list[dict[str, Any]] = []
    forward = model.forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append({k: v.detach().cpu().clone() if torch.is_tensor(v) else v
                      for k, v in kwargs.items()})
        return forward(*args, **kwargs)

    model.forward = recording
    return calls


def dataset(data: Path, **options: Any) -> Any:
    from streaming.packing.streaming import PackedStreamingDataset

    return PackedStreamingDataset(local=str(data), shuffle=True, shuffle_seed=3,
                                  packing_length=PACKING_LENGTH, packs_per_batch=2, **options)


def train(data: Path, out: Path, *, max_steps: int = 20, resume: str | None = None,
          workers: int = 0, dropout: float = 0.0, **overrides: Any
          ) -> tuple[Any, list[dict[str, Any]]]:
    """Train (or resume) and return the trainer and the recorded forward inputs."""
    from transformers import TrainingArguments

    from streaming.integrations.hf import StreamingTrainer

    model = tiny_gpt2(dropout=dropout)
    calls = record_forward(model)
    options = {"max_steps": max_steps, "learning_rate": 5e-3, "logging_steps": 1,
               "save_steps": 5, "gradient_accumulation_steps": 2, "report_to": [],
               "disable_tqdm": True, "use_cpu": True, "dataloader_num_workers": workers,
               "seed": 0, **overrides}
    args = TrainingArguments(output_dir=str(out), **options)
    trainer = StreamingTrainer(model=model, args=args, train_dataset=dataset(data))
    trainer.train(resume_from_checkpoint=resume)
    return trainer, calls


def summary(trainer: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON-able record of a run: per-batch model inputs, per-step losses, loader pulls."""
    keys = ("input_ids", "labels", "position_ids", "cu_seq_lens_q", "max_length_q")
    return {
        "calls": [{k: c[k].tolist() if torch.is_tensor(c[k]) else c[k] for k in keys}
                  for c in calls],
        "losses": {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h},
        "batches_yielded": trainer.train_batches.batches_yielded,
        "global_step": trainer.state.global_step,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("record")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--workers", type=int, default=0)
    ns = parser.parse_args(argv)
    trainer, calls = train(Path(ns.data), Path(ns.out), max_steps=ns.max_steps,
                           resume=ns.resume, workers=ns.workers)
    Path(ns.record).write_text(json.dumps(summary(trainer, calls)))


if __name__ == "__main__":
    main(sys.argv[1:])
