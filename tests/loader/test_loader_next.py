"""The loader's copy of torch's DataLoader `__next__` steps applies only to the torch it was
written against: this test fails on a torch whose `__next__` changed, and the copy is then
bypassed (batches go through torch's own `__next__`)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from streaming.loader import unannotated_next as loader_next
from streaming.loader.unannotated_next import TORCH_NEXT_NAMES, torch_next_names, unannotated


def test_installed_torch_next_is_the_one_repeated() -> None:
    names = torch_next_names()
    assert names == TORCH_NEXT_NAMES, (
        f"torch {torch.__version__} changed DataLoader's __next__ (new names "
        f"{sorted(names - TORCH_NEXT_NAMES)}, gone {sorted(TORCH_NEXT_NAMES - names)}): "
        "check streaming/loader/unannotated_next.py's steps against it, "
        "then update TORCH_NEXT_NAMES")


class _Counting:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = torch.autograd.profiler.record_function

        def counting(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(torch.autograd.profiler, "record_function", counting)


@pytest.mark.parametrize("dataset", [list(range(10)), range(7)])
def test_same_batches_and_count_as_torch(dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = DataLoader(dataset, batch_size=3)
    expected = [b.tolist() for b in loader]
    counting = _Counting(monkeypatch)
    it = iter(loader)
    got = [b.tolist() for b in unannotated(it)]
    assert got == expected
    assert it._num_yielded == len(expected)
    assert counting.calls == 0


def test_unknown_torch_uses_torch_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader_next, "_KNOWN", False)
    counting = _Counting(monkeypatch)
    got = [b.tolist() for b in unannotated(iter(DataLoader(list(range(5)), batch_size=2)))]
    assert got == [[0, 1], [2, 3], [4]]
    assert counting.calls == 4  # three batches and the call that raised StopIteration
