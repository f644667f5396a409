"""StreamingMetricsCallback in a real transformers.Trainer run: every logged step carries the
loader's metrics, in `state.log_history` and in what reporters receive."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.hf_run import dataset, tiny_gpt2, write_token_data

pytest.importorskip("transformers")


def test_trainer_logs_carry_loader_metrics(tmp_path: Path):
    from transformers import TrainerCallback, TrainingArguments

    from streaming.integrations.hf import StreamingTrainer
    from streaming.integrations.hf_metrics import StreamingMetricsCallback

    seen: list[dict] = []

    class Reporter(TrainerCallback):  # stands for wandb, tensorboard, ...
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs))

    write_token_data(tmp_path / "tokens")
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=4, logging_steps=2,
                             report_to=[], disable_tqdm=True, use_cpu=True, save_strategy="no")
    trainer = StreamingTrainer(model=tiny_gpt2(), args=args,
                               train_dataset=dataset(tmp_path / "tokens"),
                               callbacks=[StreamingMetricsCallback(), Reporter()])
    trainer.train()
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["data/batches"] for h in steps] == [2.0, 4.0]
    assert all(h["data/first_batch_s"] > 0 and "data/cache/hits" in h for h in steps)
    assert [s["data/batches"] for s in seen if "loss" in s] == [2.0, 4.0]
