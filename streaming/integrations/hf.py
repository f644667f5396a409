"""Train on a StreamingDataset with the Hugging Face `transformers.Trainer`.

`StreamingTrainer(model=..., args=..., train_dataset=ds)` is a Trainer whose training batches
come from our `StreamingDataLoader`, untouched by accelerate (the dataset already splits the
data over ranks and workers, so accelerate's sharding or dispatching could only repeat, drop or
truncate it), and whose checkpoints hold the loader's exact resumption state
(`StreamingStateCallback`), so a resumed run continues where it stopped without re-reading the
batches it already trained on. `StreamingTrainerMixin` adds the same to any Trainer subclass.
See docs/packing.md for which attention implementations keep packed sequences apart.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from streaming.dataset.streaming_dataset import StreamingDataset
from streaming.errors import StateMismatchError, TrainerSetupError, require
from streaming.loader.dataloader import StreamingDataLoader
from streaming.packing.streaming import PackedStreamingDataset

require("transformers", feature="streaming.integrations.hf", extra="hf-trainer")
require("accelerate", feature="streaming.integrations.hf", extra="hf-trainer")

from transformers import (  # noqa: E402
    PreTrainedModel,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)
from transformers import TrainingArguments as HFTrainingArguments  # noqa: E402
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint  # noqa: E402

logger = logging.getLogger(__name__)

STATE_FILE = "streaming_loader_rank{rank}.json"
# PackCollator keys a model's forward takes; the rest is bookkeeping (sample_ids, seq_is_pad...).
MODEL_KEYS = ("input_ids", "labels", "position_ids", "attention_mask")


def to_model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """The model's keyword arguments for one batch.

    A PackCollator batch keeps input_ids, labels, position_ids (and attention_mask when the
    collator makes one) and hands its `cu_seqlens` / `max_seqlen` over as transformers'
    flash-attention varlen kwargs (`cu_seq_lens_q/k`, `max_length_q/k`); other batches pass
    through unchanged.
    """
    if "cu_seqlens" not in batch:
        return batch
    inputs = {key: batch[key] for key in MODEL_KEYS if key in batch}
    longest = int(batch["max_seqlen"])
    inputs.update(cu_seq_lens_q=batch["cu_seqlens"], cu_seq_lens_k=batch["cu_seqlens"],
                  max_length_q=longest, max_length_k=longest)
    return inputs


class TrainerBatches:
    """The training batches a Trainer iterates: `loader` epoch after epoch, as model inputs.

    It has no length, so the Trainer runs one pass of `max_steps` optimizer steps over it and
    never cuts one of our epochs short (a packed epoch's batch count changes from epoch to
    epoch, which a Trainer epoch of fixed length would silently truncate).
    """

    def __init__(self, loader: StreamingDataLoader) -> None:
        self.loader = loader
        self.batches_yielded = 0  # batches read from the loader since this object was made

    def __iter__(self) -> Iterator[dict[str, Any]]:
        first = True  # a state saved on an epoch's last batch resumes into that epoch's empty end
        while True:
            batches = 0
            for batch in self.loader:
                batches += 1
                self.batches_yielded += 1
                yield to_model_inputs(batch)
            if batches == 0 and not first:
                return
            first = False

    def state_dict(self) -> dict[str, Any] | None:
        return self.loader.state_dict()

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        self.loader.load_state_dict(obj, strict=strict)


def disable_kv_cache(model: PreTrainedModel | None) -> bool:
    """Set `use_cache=False` on the model's config (and its text config), warning when it was
    on; returns whether anything changed.

    With a KV cache, transformers' sdpa and eager masks no longer detect packed sequences from
    `position_ids`, so the sequences of a pack attend to each other. Training never reads the
    cache, so turning it off costs nothing.
    """
    config = getattr(model, "config", None)
    if config is None:
        return False
    configs = [config]
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if text is not config:
        configs.append(text)
    changed = False
    for cfg in configs:
        if getattr(cfg, "use_cache", False):
            cfg.use_cache = False
            changed = True
    if changed:
        logger.warning("streaming: set model.config.use_cache=False for training; with a KV "
                       "cache transformers' sdpa/eager attention does not separate the "
                       "sequences of a pack (see docs/packing.md)")
    return changed


def checkpoint_folder(args: HFTrainingArguments, step: int) -> Path:
    """The folder the Trainer saves step `step`'s checkpoint in."""
    return Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}"


def state_path(checkpoint: str | os.PathLike, rank: int) -> Path:
    """Where rank `rank`'s loader state lives inside a checkpoint folder."""
    return Path(checkpoint) / STATE_FILE.format(rank=rank)


class StreamingStateCallback(TrainerCallback):
    """Saves `loader.state_dict()` into every checkpoint folder (one JSON file per rank) and
    loads it back when training resumes from a checkpoint, before the first batch is read.

    Needs `TrainingArguments(ignore_data_skip=True)`: otherwise the Trainer would also skip
    the already-trained batches by reading them again, on top of our exact resume point.
    The checkpoint to resume from is the one given to `resume_from` (StreamingTrainer passes
    `train(resume_from_checkpoint=...)`), else `output_dir/checkpoint-<global step>`.
    """

    def __init__(self, loader: StreamingDataLoader | TrainerBatches) -> None:
        self.loader = loader
        self.checkpoint: Path | None = None

    def resume_from(self, checkpoint: str | os.PathLike | None) -> None:
        """The checkpoint folder the next `train()` resumes from (None: the default one)."""
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None

    def on_train_begin(self, args: HFTrainingArguments, state: TrainerState,
                       control: TrainerControl | None, model: PreTrainedModel | None = None,
                       **kwargs: Any) -> None:
        if not args.ignore_data_skip:
            raise TrainerSetupError(
                "StreamingStateCallback restores the loader's exact position itself; set "
                "TrainingArguments(ignore_data_skip=True) so the Trainer does not also skip "
                "(by re-reading) the batches trained before the checkpoint")
        disable_kv_cache(model)
        checkpoint, self.checkpoint = self.checkpoint, None
        if state.global_step == 0:
            return
        folder = checkpoint or checkpoint_folder(args, state.global_step)
        path = state_path(folder, args.process_index)
        if not path.is_file():
            raise StateMismatchError(
                f"resuming at step {state.global_step} from {folder}, which holds no loader "
                f"state {path.name}; it was not saved with StreamingStateCallback")
        self.loader.load_state_dict(json.loads(path.read_text()))

    def on_save(self, args: HFTrainingArguments, state: TrainerState,
                control: TrainerControl | None, **kwargs: Any) -> None:
        folder = checkpoint_folder(args, state.global_step)
        folder.mkdir(parents=True, exist_ok=True)
        path = state_path(folder, args.process_index)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.loader.state_dict()))
        os.replace(tmp, path)


def build_train_loader(source: StreamingDataset | StreamingDataLoader,
                       args: HFTrainingArguments,
                       collate_fn: Callable[[list[Any]], Any] | None = None
                       ) -> StreamingDataLoader:
    """Our loader for `source` with the Trainer's dataloader settings (workers, pinning,
    prefetch). A packing dataset yields whole batches (batch_size=None, its own collator);
    a plain one is batched by `per_device_train_batch_size` with `collate_fn` or ours.

    The loader draws its workers' seeds from a generator of its own (seeded by `args.seed`),
    never from torch's global one: the Trainer restores that from a checkpoint before the
    loader's iterator starts, and a draw there would shift every later dropout mask.
    """
    if isinstance(source, StreamingDataLoader):
        return source
    if not isinstance(source, StreamingDataset | PackedStreamingDataset):
        raise TrainerSetupError(f"train_dataset must be a StreamingDataset or a "
                                f"StreamingDataLoader, got {type(source).__name__}")
    batch = args.per_device_train_batch_size
    if (isinstance(source, StreamingDataset) and source.batch_size is None
            and args.dataloader_num_workers > 1):
        raise TrainerSetupError(
            f"StreamingDataset without batch_size and dataloader_num_workers="
            f"{args.dataloader_num_workers}: a mid-epoch resume could not place the workers; "
            f"pass StreamingDataset(..., batch_size={batch}) (per_device_train_batch_size)")
    options: dict[str, Any] = {
        "num_workers": args.dataloader_num_workers,
        "pin_memory": bool(args.dataloader_pin_memory) and torch.cuda.is_available(),
        "generator": torch.Generator().manual_seed(int(args.seed)),
    }
    if args.dataloader_num_workers > 0:
        options["persistent_workers"] = args.dataloader_persistent_workers
        options["prefetch_factor"] = args.dataloader_prefetch_factor
        options["multiprocessing_context"] = getattr(args, "dataloader_multiprocessing_context",
                                                     None)
    if isinstance(source, PackedStreamingDataset):
        if collate_fn is not None:
            raise TrainerSetupError(
                "a packing dataset collates its own batches; pass collator=PackCollator(...) "
                "to the dataset instead of data_collator to the Trainer")
        return StreamingDataLoader(source, batch_size=None, **options)
    return StreamingDataLoader(source, batch_size=batch, drop_last=args.dataloader_drop_last,
                               collate_fn=collate_fn, **options)


def epoch_batches(loader: StreamingDataLoader, epoch: int) -> int:
    """Batches `loader` yields on this rank in `epoch`."""
    dataset = loader.dataset
    if isinstance(dataset, PackedStreamingDataset):
        return -(-dataset.pack_count(epoch) // dataset.packs_per_batch)
    return len(loader)


def planned_steps(loader: StreamingDataLoader, epochs: float, grad_accum: int) -> int:
    """Optimizer steps of `epochs` whole epochs (from epoch 0) with `grad_accum` batches each."""
    if epochs <= 0 or epochs != int(epochs):
        raise TrainerSetupError(f"num_train_epochs must be a positive whole number when "
                                f"max_steps is not set, got {epochs}")
    batches = sum(epoch_batches(loader, epoch) for epoch in range(int(epochs)))
    return max(math.ceil(batches / grad_accum), 1)


class StreamingTrainerMixin:
    """Put before a Trainer class (`class T(StreamingTrainerMixin, SomeTrainer)`) to train
    on a StreamingDataset or StreamingDataLoader given as `train_dataset`.

    It builds the loader from the training arguments, returns it from `get_train_dataloader`
    (not passed through accelerate, so nothing is re-sharded, dispatched or sliced), sets
    `ignore_data_skip=True`, turns the model's KV cache off for training, registers a
    StreamingStateCallback, and turns `num_train_epochs` into `max_steps` when no `max_steps`
    is given (the loader runs epoch after epoch; our epochs may differ in length).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        collate_fn = kwargs.get("data_collator")
        super().__init__(*args, **kwargs)
        self.train_batches: TrainerBatches | None = None
        self.streaming_callback: StreamingStateCallback | None = None
        if self.train_dataset is not None:  # else evaluation only: nothing to set up
            self._set_up_streaming(collate_fn)

    def _set_up_streaming(self, collate_fn: Callable[[list[Any]], Any] | None) -> None:
        targs = self.args
        loader = build_train_loader(self.train_dataset, targs, collate_fn)
        self.train_batches = TrainerBatches(loader)
        if not targs.ignore_data_skip:
            targs.ignore_data_skip = True
            logger.info("streaming: ignore_data_skip=True (the loader resumes exactly itself)")
        if targs.max_steps <= 0:
            targs.max_steps = planned_steps(loader, targs.num_train_epochs,
                                            targs.gradient_accumulation_steps)
        disable_kv_cache(self.model)
        self.streaming_callback = StreamingStateCallback(self.train_batches)
        self.add_callback(self.streaming_callback)

    def get_train_dataloader(self) -> TrainerBatches:
        if self.train_batches is None:
            return super().get_train_dataloader()  # raises: no train_dataset
        return self.train_batches

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any,
              **kwargs: Any) -> Any:
        checkpoint = resume_from_checkpoint
        if checkpoint is True:
            checkpoint = get_last_checkpoint(self.args.output_dir)
        if self.streaming_callback is not None:
            self.streaming_callback.resume_from(checkpoint if checkpoint else None)
        return super().train(resume_from_checkpoint, *args, **kwargs)


class StreamingTrainer(StreamingTrainerMixin, Trainer):
    """`transformers.Trainer` training on a StreamingDataset (see StreamingTrainerMixin)."""
