"""Resumption state: plain ints and strings saying where in which epoch's global order to go on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from streaming.errors import StateMismatchError

STATE_VERSION = 1


@dataclass(frozen=True)
class ResumeState:
    """Position in the canonical global order plus what must match for it to mean the same thing.

    `sample_in_epoch` counts global samples (all data-parallel ranks) already consumed in `epoch`.
    `num_canonical_nodes` and `shuffle_seed` are adopted on load so the order survives a change
    of topology; `fingerprint` guards everything else that shapes the order.
    """

    epoch: int
    sample_in_epoch: int
    num_canonical_nodes: int
    shuffle_seed: int
    fingerprint: str
    initial_physical_nodes: int = 1
    version: int = STATE_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ResumeState:
        """Parse a state dict (ours, or the reference's keys without a fingerprint)."""
        if not isinstance(obj, dict):
            raise StateMismatchError(f"a resumption state must be a dict, got {type(obj).__name__}")
        missing = [k for k in ("epoch", "sample_in_epoch") if k not in obj]
        if missing:
            raise StateMismatchError(f"resumption state lacks {missing}: {obj!r}")
        try:
            epoch, sample = int(obj["epoch"]), int(obj["sample_in_epoch"])
            ncn = int(obj.get("num_canonical_nodes") or 0)
            seed = int(obj.get("shuffle_seed", -1))
        except (TypeError, ValueError) as exc:
            raise StateMismatchError(f"resumption state has a non-integer field: {exc}") from None
        if epoch == -1 and sample == 0:  # the reference's state before any iteration
            epoch = 0
        if epoch < 0 or sample < 0:
            raise StateMismatchError(f"resumption state has a negative position: {obj!r}")
        return cls(epoch=epoch, sample_in_epoch=sample, num_canonical_nodes=ncn,
                   shuffle_seed=seed, fingerprint=str(obj.get("fingerprint", "")),
                   initial_physical_nodes=int(obj.get("initial_physical_nodes") or 1),
                   version=int(obj.get("version", STATE_VERSION)))

    def check(self, fingerprint: str, *, strict: bool = True) -> None:
        """StateMismatchError unless the state was taken from a dataset shaped like this one."""
        if self.version > STATE_VERSION:
            raise StateMismatchError(
                f"resumption state version {self.version} is newer than this library's "
                f"({STATE_VERSION})")
        if strict and self.fingerprint and self.fingerprint != fingerprint:
            raise StateMismatchError(
                f"resumption state was taken with dataset fingerprint {self.fingerprint}, this "
                f"dataset has {fingerprint}: streams, weights, epoch_size, batching or shuffle "
                "settings differ. Pass load_state_dict(state, strict=False) to resume anyway "
                "(the sample order will not continue exactly).")


@dataclass(frozen=True)
class WorkerPosition:
    """How far one DataLoader worker got in its list of the iteration a state points at.

    torchdata's StatefulDataLoader saves each worker's state separately (taken in the worker,
    as of the last batch the trainer received from it) and gives each worker back its own, so
    a worker state records the iteration's start (the ResumeState) plus this worker's count.
    The count indexes a plan for this many nodes and ranks per node, so it resumes on the
    same shape only (a rank-wide StreamingDataLoader state resumes on any).
    """

    worker: int
    num_workers: int
    samples: int
    ended: bool
    num_nodes: int = 1
    ranks_per_node: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, obj: Any) -> WorkerPosition:
        try:
            position = cls(int(obj["worker"]), int(obj["num_workers"]), int(obj["samples"]),
                           bool(obj["ended"]), int(obj.get("num_nodes", 1)),
                           int(obj.get("ranks_per_node", 1)))
        except (TypeError, KeyError, ValueError) as exc:
            raise StateMismatchError(f"malformed per-worker position {obj!r}: {exc}") from None
        if not 0 <= position.worker < position.num_workers or position.samples < 0:
            raise StateMismatchError(f"malformed per-worker position {obj!r}")
        return position
