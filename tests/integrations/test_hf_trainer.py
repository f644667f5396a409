"""StreamingTrainer: a tiny GPT-2 trained by transformers.Trainer on packed MDS data (CPU)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import torch

from streaming.dataset.streaming_dataset import StreamingDataset
from streaming.errors import StateMismatchError, TrainerSetupError
from streaming.integrations.hf import (
    StreamingStateCallback,
    StreamingTrainer,
    TrainerBatches,
    to_model_inputs,
)
from streaming.loader.dataloader import StreamingDataLoader
from tests.integrations.hf_run import dataset, record_forward, tiny_gpt2, train, write_token_data
from tests.support.processes import free_port

REPO = Path(__file__).resolve().parents[2]
MAX_STEPS, ACCUM, CHECKPOINT = 20, 2, 10  # 40 batches; the resumed run starts at batch 20


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hf") / "tokens"
    write_token_data(root)
    return root


@pytest.fixture(scope="module")
def full_run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf-full")
    trainer, calls = train(data, out, max_steps=MAX_STEPS)
    return out, trainer, calls


def losses(trainer) -> dict[int, float]:
    return {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}


def args(out: Path, **options):
    from transformers import TrainingArguments

    defaults = {"max_steps": 4, "report_to": [], "disable_tqdm": True, "use_cpu": True,
                "save_strategy": "no", "dataloader_num_workers": 0}
    return TrainingArguments(output_dir=str(out), **{**defaults, **options})


def test_loss_decreases(full_run) -> None:
    _, trainer, _ = full_run
    steps = losses(trainer)
    assert sorted(steps) == list(range(1, MAX_STEPS + 1))
    first = np.mean([steps[s] for s in (1, 2, 3)])
    last = np.mean([steps[s] for s in (MAX_STEPS - 2, MAX_STEPS - 1, MAX_STEPS)])
    assert last < first - 0.5, (first, last)


def test_model_receives_every_batch_with_intact_metadata(full_run, data) -> None:
    _, trainer, calls = full_run
    assert len(calls) == MAX_STEPS * ACCUM == trainer.train_batches.batches_yielded
    for call in calls:
        rows, width = call["input_ids"].shape
        cu = call["cu_seq_lens_q"]
        starts = torch.nonzero(call["position_ids"].reshape(-1) == 0).reshape(-1)
        assert cu.tolist() == starts.tolist() + [rows * width]  # one segment per sequence
        assert cu.numel() > rows + 1  # longer than the batch: a slice to batch size cuts it
        assert torch.equal(call["cu_seq_lens_k"], cu) and cu.dtype == torch.int32
        assert call["max_length_q"] == call["max_length_k"] == int(torch.diff(cu).max())
        assert (call["labels"].reshape(-1)[starts] == -100).all()
        assert {"sample_ids", "seq_is_pad", "cu_seqlens"}.isdisjoint(call)
    # The same batches as our loader yields by itself, across the epoch boundary.
    loader = StreamingDataLoader(dataset(data), batch_size=None)
    expected = [to_model_inputs(b) for b in islice(TrainerBatches(loader), len(calls))]
    assert len(loader) < len(calls)  # the run crossed into the second epoch
    for call, want in zip(calls, expected):
        for key in ("input_ids", "labels", "position_ids", "cu_seq_lens_q"):
            assert torch.equal(call[key], want[key]), key


def test_resume_in_a_new_process_equals_the_uninterrupted_run(full_run, data, tmp_path) -> None:
    full_out, trainer, calls = full_run
    checkpoint = full_out / f"checkpoint-{CHECKPOINT}"
    saved = json.loads((checkpoint / "streaming_loader_rank0.json").read_text())
    assert saved["packs_in_epoch"] == CHECKPOINT * ACCUM * 2  # 2 packs per batch
    record = tmp_path / "resumed.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "tests.integrations.hf_run", str(data),
                    str(tmp_path / "out"), str(record), "--max-steps", str(MAX_STEPS),
                    "--resume", str(checkpoint), "--workers", "2"],
                   cwd=REPO, env=env, check=True, timeout=240)
    resumed = json.loads(record.read_text())
    assert resumed["global_step"] == MAX_STEPS
    # Nothing re-read: the loader handed over only the batches after the checkpoint.
    assert resumed["batches_yielded"] == (MAX_STEPS - CHECKPOINT) * ACCUM
    later = calls[CHECKPOINT * ACCUM:]
    assert len(resumed["calls"]) == len(later)
    for got, want in zip(resumed["calls"], later):
        for key, value in got.items():
            expect = want[key].tolist() if torch.is_tensor(want[key]) else want[key]
            assert value == expect, key
    full = losses(trainer)
    after = {int(step): loss for step, loss in resumed["losses"].items()
             if int(step) > CHECKPOINT}  # the log history before it comes from the checkpoint
    assert sorted(after) == list(range(CHECKPOINT + 1, MAX_STEPS + 1))
    for step, loss in after.items():
        assert loss == pytest.approx(full[step], abs=1e-5)


def test_resume_without_the_loader_state_fails_loudly(full_run, data, tmp_path) -> None:
    full_out, _, _ = full_run
    checkpoint = tmp_path / f"checkpoint-{CHECKPOINT}"
    shutil.copytree(full_out / f"checkpoint-{CHECKPOINT}", checkpoint)
    (checkpoint / "streaming_loader_rank0.json").unlink()
    trainer = StreamingTrainer(model=tiny_gpt2(), args=args(tmp_path, max_steps=MAX_STEPS),
                               train_dataset=dataset(data))
    with pytest.raises(StateMismatchError, match="no loader state"):
        trainer.train(resume_from_checkpoint=str(checkpoint))


def test_trainer_skipping_is_off_and_required(data, tmp_path) -> None:
    from transformers import TrainerState

    trainer = StreamingTrainer(model=tiny_gpt2(), args=args(tmp_path, ignore_data_skip=False),
                               train_dataset=dataset(data))
    assert trainer.args.ignore_data_skip
    callback = StreamingStateCallback(trainer.train_batches)
    with pytest.raises(TrainerSetupError, match="ignore_data_skip"):
        callback.on_train_begin(args(tmp_path), TrainerState(), None)


def test_kv_cache_is_turned_off_with_a_warning(data, tmp_path, caplog) -> None:
    # transformers 5's Trainer applies TrainingArguments.use_cache (default False) to the
    # model's config; asking for the cache there brings the packing trap back.
    model = tiny_gpt2(use_cache=True)
    with caplog.at_level(logging.WARNING, logger="streaming.integrations.hf"):
        StreamingTrainer(model=model, args=args(tmp_path, use_cache=True),
                         train_dataset=dataset(data))
    assert model.config.use_cache is False
    assert any("use_cache=False" in r.getMessage() for r in caplog.records)


def test_a_packing_dataset_refuses_a_trainer_collator(data, tmp_path) -> None:
    with pytest.raises(TrainerSetupError, match="collates its own batches"):
        StreamingTrainer(model=tiny_gpt2(), args=args(tmp_path), train_dataset=dataset(data),
                         data_collator=lambda samples: samples)
    with pytest.raises(TrainerSetupError, match="StreamingDataset"):
        StreamingTrainer(model=tiny_gpt2(), args=args(tmp_path), train_dataset=[1, 2, 3])


@pytest.mark.parametrize("epochs", [1.5, 0])
def test_epochs_that_are_not_whole_are_refused_without_max_steps(data, tmp_path, epochs) -> None:
    with pytest.raises(TrainerSetupError, match=f"num_train_epochs must be a positive whole "
                                                f"number when max_steps is not set, got {epochs}"):
        StreamingTrainer(model=tiny_gpt2(), args=args(tmp_path, max_steps=-1,
                                                      num_train_epochs=epochs),
                         train_dataset=dataset(data))


def test_without_a_train_dataset_nothing_is_set_up(tmp_path) -> None:
    trainer = StreamingTrainer(model=tiny_gpt2(), args=args(tmp_path))
    assert trainer.train_batches is None and trainer.streaming_callback is None
    with pytest.raises(ValueError, match="train_dataset"):
        trainer.get_train_dataloader()


def test_epochs_become_exact_steps(tmp_path) -> None:
    write_token_data(tmp_path / "small", n=40)
    ds = dataset(tmp_path / "small")
    per_epoch = [-(-ds.pack_count(e) // ds.packs_per_batch) for e in (0, 1)]
    model = tiny_gpt2()
    calls = record_forward(model)
    trainer = StreamingTrainer(model=model, args=args(tmp_path, max_steps=-1,
                                                      num_train_epochs=2), train_dataset=ds)
    assert trainer.args.max_steps == sum(per_epoch)
    trainer.train()
    assert len(calls) == sum(per_epoch)
    state = trainer.train_batches.state_dict()
    assert (state["source"]["epoch"], state["packs_in_epoch"]) == (2, 0)  # both epochs, in full


def test_a_fractional_epoch_count_without_max_steps_is_refused(data, tmp_path) -> None:
    with pytest.raises(TrainerSetupError, match="num_train_epochs must be a positive whole"):
        StreamingTrainer(model=tiny_gpt2(), args=args(tmp_path, max_steps=-1,
                                                      num_train_epochs=1.5),
                         train_dataset=dataset(data))


def pad_tokens(samples: list[dict]) -> dict[str, torch.Tensor]:
    """A user collator for plain samples: right-pad with token 0 and label -100."""
    width = max(len(s["tokens"]) for s in samples)
    ids = torch.zeros(len(samples), width, dtype=torch.long)
    labels = torch.full((len(samples), width), -100, dtype=torch.long)
    for row, sample in enumerate(samples):
        tokens = torch.as_tensor(np.asarray(sample["tokens"], dtype=np.int64))
        ids[row, :tokens.numel()] = tokens
        labels[row, :tokens.numel()] = tokens
    return {"input_ids": ids, "labels": labels}


def test_plain_dataset_with_a_user_collator_resumes_exactly(data, tmp_path) -> None:
    def run(resume: str | None):
        model = tiny_gpt2()
        calls = record_forward(model)
        options = {"max_steps": 6, "save_strategy": "steps", "save_steps": 3,
                   "per_device_train_batch_size": 4}
        trainer = StreamingTrainer(
            model=model, args=args(tmp_path / ("resumed" if resume else "full"), **options),
            train_dataset=StreamingDataset(local=str(data), shuffle=True, shuffle_seed=5),
            data_collator=pad_tokens)
        trainer.train(resume_from_checkpoint=resume)
        return trainer, calls

    _, full = run(None)
    assert [c["input_ids"].shape[0] for c in full] == [4] * 6
    trainer, resumed = run(str(tmp_path / "full" / "checkpoint-3"))
    assert trainer.train_batches.batches_yielded == 3
    for got, want in zip(resumed, full[3:], strict=True):
        assert torch.equal(got["input_ids"], want["input_ids"])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_resume_with_dropout_on_equals_the_uninterrupted_losses(data, tmp_path, workers) -> None:
    """Dropout draws from the global generator the Trainer restores from the checkpoint: the
    loader must not draw from it when its iterator starts."""
    options = {"max_steps": 6, "save_steps": 3, "workers": workers, "dropout": 0.1}
    full, _ = train(data, tmp_path / "full", **options)
    resumed, _ = train(data, tmp_path / "resumed", resume=str(tmp_path / "full" / "checkpoint-3"),
                       **options)
    want = losses(full)
    got = {step: loss for step, loss in losses(resumed).items() if step > 3}  # after the resume
    assert sorted(got) == [4, 5, 6] and len(want) == 6
    assert all(abs(got[step] - want[step]) <= 1e-6 for step in got), (got, want)


def test_a_plain_dataset_without_batch_size_and_workers_is_refused(data, tmp_path) -> None:
    """Its mid-epoch resume would need the batch size: refused before training, not after."""
    with pytest.raises(TrainerSetupError, match="batch_size=4"):
        StreamingTrainer(model=tiny_gpt2(), train_dataset=StreamingDataset(local=str(data)),
                         args=args(tmp_path, per_device_train_batch_size=4,
                                   dataloader_num_workers=2))


def test_two_ranks_read_their_own_batches_and_resume_exactly(data, tmp_path) -> None:
    port = free_port()
    record = tmp_path / "rank"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    "--master-addr", "127.0.0.1", "--master-port", str(port),
                    "-m", "tests.integrations.hf_ddp", str(data), str(tmp_path / "out"),
                    str(record)], cwd=REPO, env=env, check=True, timeout=240)
    ranks = [json.loads(Path(f"{record}.{r}").read_text()) for r in (0, 1)]
    checkpoint = tmp_path / "out" / "checkpoint-4"
    assert {p.name for p in checkpoint.glob("streaming_loader_rank*.json")} == {
        "streaming_loader_rank0.json", "streaming_loader_rank1.json"}
    for rank in ranks:
        assert rank["ranks"] == 2 and len(rank["full"]) == 8
        assert rank["packs_in_epoch"] == 8 * 2 * 2  # global: steps x packs per batch x ranks
        assert rank["resumed"] == rank["full"][4:]
    assert all(a != b for a, b in zip(ranks[0]["full"], ranks[1]["full"]))
