"""llm-foundry's data builders over this project's `streaming`, run by test_llmfoundry.py in a
child pytest with the stand-ins of tests/support/standins on the path (never collected here:
importing llm-foundry pulls Composer and the torchvision stand-in into the process)."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.clients.helpers import use_standins

use_standins()

from composer import Trainer  # noqa: E402
from composer.models import ComposerModel  # noqa: E402
from llmfoundry.callbacks import CurriculumLearning  # noqa: E402
from llmfoundry.data.finetuning import build_finetuning_dataloader  # noqa: E402
from llmfoundry.data.text_data import StreamingTextDataset, build_text_dataloader  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from streaming import StreamingDataLoader, StreamingDataset  # noqa: E402
from writers import MDSWriter  # noqa: E402

WORDS = [f"w{i}" for i in range(40)]
SEQ = 16
SOLO = {"prefetch_factor": None, "persistent_workers": False}  # no DataLoader workers


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>")


def write_tokens(out: Path, n: int, start: int) -> Path:
    with MDSWriter(columns={"tokens": "ndarray:int64"}, out=str(out), size_limit=1 << 10) as w:
        for i in range(n):
            w.write({"tokens": np.arange(start + i, start + i + SEQ, dtype=np.int64)})
    return out


@pytest.fixture(scope="module")
def text_dirs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("foundry")
    return write_tokens(root / "a", 40, 0), write_tokens(root / "b", 24, 1000)


def batches(loader, n: int) -> list[torch.Tensor]:
    out = []
    for batch in loader:
        out.append(batch["input_ids"])
        if len(out) == n:
            break
    return out


def test_build_text_dataloader_with_dataset_local(tokenizer, text_dirs) -> None:
    a, _ = text_dirs
    cfg = {"local": str(a), "max_seq_len": SEQ, "shuffle": True, "shuffle_seed": 3,
           "num_canonical_nodes": 1}
    spec = build_text_dataloader(tokenizer, 4, cfg, drop_last=True, num_workers=0, **SOLO)
    got = batches(spec.dataloader, 10)
    assert [tuple(b.shape) for b in got] == [(4, SEQ)] * 10
    firsts = sorted(int(b[0]) for batch in got for b in batch)
    assert firsts == list(range(40))  # one epoch of 40 samples, each once


def test_build_text_dataloader_with_streams(tokenizer, text_dirs) -> None:
    a, b = text_dirs
    cfg = {"streams": {"a": {"local": str(a), "repeat": 1}, "b": {"local": str(b), "repeat": 2}},
           "max_seq_len": SEQ, "shuffle": False}
    spec = build_text_dataloader(tokenizer, 4, cfg, drop_last=False, num_workers=0, **SOLO)
    firsts = [int(s[0]) for batch in spec.dataloader for s in batch["input_ids"]]
    assert sorted(firsts) == sorted(list(range(40)) + 2 * list(range(1000, 1024)))


def test_streaming_text_dataset_forwards_every_argument(tokenizer, text_dirs, tmp_path) -> None:
    a, _ = text_dirs
    forwarded = set(inspect.signature(StreamingTextDataset).parameters) - {
        "tokenizer", "max_seq_len", "token_encoding_type", "streams", "kwargs"}
    assert forwarded <= set(inspect.signature(StreamingDataset).parameters)
    args = dict(remote=str(a), local=str(tmp_path / "cache"), split=None, download_retry=1,
                download_timeout=30, validate_hash=None, keep_zip=True, epoch_size=20,
                predownload=8, cache_limit="10mb", partition_algo="relaxed",
                num_canonical_nodes=2, batch_size=4, shuffle=True, shuffle_algo="py1e",
                shuffle_seed=11, shuffle_block_size=16, sampling_method="fixed",
                sampling_granularity=2, batching_method="random", allow_unsafe_types=False,
                replication=None, stream_name="stream", stream_config=None)
    assert set(args) == forwarded
    ds = StreamingTextDataset(tokenizer=tokenizer, max_seq_len=8, token_encoding_type="int64",
                              **args)
    samples = [ds[i] for i in range(len(ds))]
    assert len(samples) == 20 and all(s.shape == (8,) and s.dtype == torch.int64
                                      for s in samples)
    assert (ds.shuffle_seed, ds.num_canonical_nodes, ds.batch_size) == (11, 2, 4)


def write_pairs(out: Path, n: int) -> Path:
    with MDSWriter(columns={"prompt": "str", "response": "str"}, out=str(out),
                   size_limit=1 << 10) as w:
        for i in range(n):
            w.write({"prompt": " ".join(WORDS[i % 10:i % 10 + 3]),
                     "response": " ".join(WORDS[20 + i % 7:25 + i % 7])})
    return out


def test_build_finetuning_dataloader(tokenizer, tmp_path) -> None:
    data = write_pairs(tmp_path / "ft", 24)
    cfg = {"remote": str(data), "local": str(tmp_path / "cache"), "split": None,
           "max_seq_len": SEQ, "decoder_only_format": True, "shuffle": True,
           "packing_ratio": None}
    spec = build_finetuning_dataloader(tokenizer, 4, cfg, drop_last=False, num_workers=0, **SOLO)
    got = list(spec.dataloader)
    assert sum(len(b["input_ids"]) for b in got) == 24
    assert all(b["input_ids"].shape == b["labels"].shape for b in got)


class Tiny(ComposerModel):
    """One weight; llm-foundry's callbacks want a `tokenizer` attribute on the model."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.w = torch.nn.Parameter(torch.ones(1))

    def forward(self, batch: dict) -> torch.Tensor:
        tokens = batch["tokens"] if "tokens" in batch else batch["input_ids"]  # ours, foundry
        return tokens.float() * self.w

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        return outputs.pow(2).mean()


def test_curriculum_learning_accepts_streaming_dataloader(tokenizer, text_dirs) -> None:
    a, b = text_dirs
    loader = StreamingDataLoader(StreamingDataset(local=str(a), batch_size=4), batch_size=4)
    assert isinstance(loader.dataset, StreamingDataset)
    train_config = {"train_loader": {"name": "text", "dataset": {"local": str(a),
                                     "max_seq_len": SEQ}, "drop_last": False,
                                     "num_workers": 0, **SOLO},
                    "device_train_batch_size": 4}
    schedule = [{"duration": "1ep", "dataset": {"local": str(b)}}]
    callback = CurriculumLearning(train_config, schedule, duration="1ep")
    trainer = Trainer(model=Tiny(tokenizer), train_dataloader=loader, max_duration="2ep",
                      callbacks=[callback], device="cpu", progress_bar=False,
                      log_to_console=False, loggers=[])
    trainer.fit()
    assert int(trainer.state.timestamp.iteration) == 2
    trainer.close()
