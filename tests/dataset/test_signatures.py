"""The public constructors show their real keywords and defaults (tools such as llm-foundry
filter config keys by `inspect.signature`; IDEs show it) and document them under `Args:`."""

from __future__ import annotations

import inspect
import re

import pytest

from streaming import Stream, StreamingDataLoader, StreamingDataset
from writers import MDSWriter
from writers.text_writers import CSVWriter, JSONWriter, TSVWriter, XSVWriter

EXPECTED = {
    StreamingDataset: {"streams": None, "remote": None, "local": None, "batch_size": None,
                       "shuffle": False, "shuffle_algo": "py1e", "shuffle_seed": 9176,
                       "num_canonical_nodes": None, "packing": False},
    Stream: {"remote": None, "local": None, "proportion": None, "repeat": None},
    StreamingDataLoader: {"batch_size": 1, "num_workers": 0, "drop_last": False,
                          "persistent_workers": False},
    MDSWriter: {"compression": None, "exist_ok": False, "lengths": None},
    JSONWriter: {"newline": "\n", "exist_ok": False},
    XSVWriter: {"separator": inspect.Parameter.empty, "newline": "\n"},
    CSVWriter: {"newline": "\n", "retry": 2},
    TSVWriter: {"newline": "\n", "retry": 2},
}


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_signature_lists_the_real_keywords(cls) -> None:
    params = inspect.signature(cls).parameters
    kinds = {p.kind for p in params.values()}
    assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}, params
    assert {name: params[name].default for name in EXPECTED[cls]} == EXPECTED[cls]
    assert "Args:" in (cls.__doc__ or "")
    if cls in (CSVWriter, TSVWriter):
        assert "separator" not in params


def test_a_subclass_keeps_its_own_signature() -> None:
    class Text(StreamingDataset):
        def __init__(self, tokenizer: str, *, local: str) -> None:
            super().__init__(local=local)

    assert list(inspect.signature(Text).parameters) == ["tokenizer", "local"]


def test_the_loader_signature_reads_as_torchs_keywords_with_public_types() -> None:
    """StreamingDataLoader takes DataLoader's keywords, in its order, each typed with public
    names (no `_collate_fn_t`, no `_T_co`) and none untyped."""
    from torch.utils.data import DataLoader

    ours = inspect.signature(StreamingDataLoader)
    torchs = list(inspect.signature(DataLoader.__init__).parameters)[1:]
    assert [name for name in ours.parameters if name in torchs] == torchs
    assert set(ours.parameters) - set(torchs) <= {"in_order"}  # newer than some torch versions
    for param in ours.parameters.values():
        annotation = str(param.annotation)
        assert param.annotation is not inspect.Parameter.empty, param
        assert not re.search(r"(^|\W)_\w", annotation), f"a private name in {param}"
    assert str(ours.return_annotation) == "None"
