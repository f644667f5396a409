"""Where `streaming plan` runs its per-node cache simulations: in this process for a small run,
in a pool of processes (at most one per core and one per node) for a large one. Each node's
simulation is independent and pure, so the figures are the same either way."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Generic, TypeVar

from streaming.cli._common import UserError
from streaming.observe.forecast import NodeMap

T = TypeVar("T")

POOL_FROM_SAMPLES = 5_000_000  # samples simulated (epoch size x epochs) from which a pool pays


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def plan_jobs(asked: int | None, nodes: int, samples: int) -> int:
    """How many processes simulate the nodes.

    Args:
        asked: `--jobs` (None: one per usable core for a run of POOL_FROM_SAMPLES samples or
            more, else 1).
        nodes: the run's nodes (no more processes than nodes).
        samples: samples simulated per node summed over the job (epoch size x epochs).
    """
    if asked is not None:
        if asked < 1:
            raise UserError(f"--jobs must be at least 1, got {asked}")
        return max(min(asked, nodes), 1)
    if samples < POOL_FROM_SAMPLES:
        return 1
    return max(min(usable_cores(), nodes), 1)


@contextmanager
def node_map(jobs: int) -> Iterator[NodeMap]:
    """A `NodeMap` over `jobs` processes (the built-in `map` for one), open for the block.

    Args:
        jobs: processes to run the nodes' simulations in.
    """
    if jobs <= 1:
        yield map
        return
    # spawn: the children import only the simulation, whatever threads this process runs
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:

        def pooled(fn: Callable[[int], T], nodes: Iterable[int], /) -> Iterable[T]:
            todo = list(nodes)
            done = pool.map(Recorded(fn), todo, chunksize=max(len(todo) // (jobs * 4), 1))
            return rewarned(done)

        yield pooled


@dataclass(frozen=True)
class Recorded(Generic[T]):
    """`fn` run in a child process, returning its value with the warnings it raised (the
    parent shows them as its own, so they read like the rest of the command's output).

    Args:
        fn: the per-node function.
    """

    fn: Callable[[int], T]

    def __call__(self, node: int) -> tuple[T, list[tuple[type[Warning], str]]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = self.fn(node)
        return value, [(w.category, str(w.message)) for w in caught]


def rewarned(results: Iterable[tuple[T, list[tuple[type[Warning], str]]]]) -> Iterator[T]:
    """The values of `Recorded` results, their warnings raised again in this process."""
    for value, raised in results:
        for category, message in raised:
            warnings.warn(message, category, stacklevel=2)
        yield value
