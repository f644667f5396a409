"""What packing asks of its source's session, and nothing more: the plan (the config, the
rank's world and ids, a value computed once per node), this process's iteration (begun,
counted, failed, where it stands) and the resume state it extends with a count of packs.
StreamingDataset's `Session` offers it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from streaming.plan import PlanConfig, World

if TYPE_CHECKING:
    from streaming.dataset.iteration_run import Iteration, Progress


class PackPlans(Protocol):
    """The plan as packing reads it (`streaming.dataset.plan_view.PlanView`)."""

    def config_now(self) -> PlanConfig: ...

    def rank_world(self) -> World: ...

    def worker_sample_ids(self, epoch: int, sample_in_epoch: int,
                          world: World | None = None) -> np.ndarray: ...

    def node_value(self, key: str, compute: Callable[[], int]) -> int: ...


class PackRun(Protocol):
    """This process's iteration (`streaming.dataset.iteration_run.IterationRun`)."""

    @property
    def count(self) -> int: ...

    def note_pending(self) -> None: ...

    def iteration(self, *, settle: bool = True) -> AbstractContextManager[Iteration]: ...

    def failing_on_error(self) -> AbstractContextManager[None]: ...

    def progress(self) -> Progress: ...

    def latest_epoch(self) -> int: ...

    def running_or_next_epoch(self) -> int: ...


class PackResume(Protocol):
    """The source's resume state (`streaming.dataset.resumption.Resumption`)."""

    def resume_state(self, epoch: int, sample_in_epoch: int) -> dict[str, Any]: ...

    def worker_position(self, progress: Progress) -> dict[str, Any]: ...

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None: ...


class PackSession(Protocol):
    """The session of a packed dataset's source (`streaming.dataset.session.Session`)."""

    @property
    def plans(self) -> PackPlans: ...

    @property
    def run(self) -> PackRun: ...

    @property
    def resume(self) -> PackResume: ...

    def shared_name(self, tag: str) -> str: ...
