"""One pass over a torch DataLoader whose error leaves its workers at once (`drain`), and the
first batches of a loader with its state after them (`take`).

torch re-raises a worker's error from a frame that refers to the error, so the traceback keeps
the loader's iterator in a reference cycle. The garbage collector then stops the iterator's
queue threads before the iterator's own shutdown runs, the workers never hear that the pass is
over, and torch waits out its join timeout for each one before it terminates it. Cutting the
traceback here frees the iterator at once, and its shutdown reaches the workers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def drain(loader: Iterable[T]) -> list[T]:
    """Every item of one pass over `loader`; an error is raised without its traceback.

    Args:
        loader: A DataLoader (or any iterable) to read to its end.
    """
    try:
        return list(loader)
    except Exception as exc:
        raise exc.with_traceback(None)  # noqa: B904 (the same error, without the frames)


def take(loader: Iterable[dict], batches: int) -> tuple[list[int], dict]:
    """The `id`s of a loader's first `batches` batches and its state right after them.

    Args:
        loader: A StreamingDataLoader (anything with `state_dict()`) whose batches hold `id`.
        batches: How many batches to take.
    """
    seen: list[int] = []
    for k, batch in enumerate(loader):
        seen += batch["id"].tolist()
        if k + 1 == batches:
            break
    return seen, loader.state_dict()  # type: ignore[attr-defined]
