"""`mix_unit: tokens` in a `streaming plan` config: each stream's samples per epoch, set from its
sample lengths by the dataset's own token mix (`mix_by_tokens`), so the plan draws what the run
will. The lengths come from side files (a remote's fetched into a scratch folder, removed after)
or from a scan of a stream read in place; a remote stream without side files for the column is
refused rather than downloaded whole."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.cli._common import UserError
from streaming.errors import PlanError

if TYPE_CHECKING:
    from streaming.format.index import DatasetIndex
    from streaming.plan import StreamWeights


@dataclass(frozen=True)
class ConfigStream:
    """A stream of the config as the token mix needs it.

    Args:
        name: its name in the plan's output.
        folder: its dataset folder when read in place (None for a remote).
        remote: its remote, if any.
        split: the split under the remote.
        proportion: its token share, as the config gives it.
    """

    name: str
    folder: Path | None
    remote: str | None
    split: str
    proportion: float | None


def mix_weights(config: dict[str, Any], where: Path, streams: Sequence[ConfigStream],
                indexes: Sequence[DatasetIndex], weights: list[StreamWeights],
                plan_keys: dict[str, Any]) -> list[StreamWeights]:
    """The streams' weights under the config's `mix_unit`: `weights` as the streams give them
    for "samples", each stream's `choose` for "tokens" (`token_weights`; the epoch size then
    moves out of `plan_keys` into the counts).

    Args:
        config: the parsed config.
        where: the config file, for messages.
        streams: the config's streams.
        indexes: each stream's index.
        weights: the weights the streams give.
        plan_keys: the PlanConfig keywords of the config.
    """
    unit = config.get("mix_unit", "samples")
    if unit not in ("samples", "tokens"):
        raise UserError(f"{where}: mix_unit must be samples or tokens, got {unit!r}")
    column = config.get("lengths_column", "tokens")
    if not isinstance(column, str) or not column:
        raise UserError(f"{where}: lengths_column must name a column, got {column!r}")
    if unit == "samples":
        return weights
    return token_weights(streams, indexes, column, plan_keys.pop("epoch_size", None))


def token_weights(streams: Sequence[ConfigStream], indexes: Sequence[DatasetIndex],
                  column: str, epoch_size: int | str | None) -> list[StreamWeights]:
    """Each stream's `choose` count under `mix_unit: tokens`, as StreamingDataset sets it.

    Args:
        streams: the config's streams.
        indexes: each stream's index.
        column: the column whose lengths count (`lengths_column`).
        epoch_size: the config's `epoch_size` (None: every stream's samples).
    """
    from streaming.dataset.token_mix import check_mix_unit, mix_by_tokens
    from streaming.packing.lengths_traffic import records_lengths
    from streaming.plan import StreamWeights
    from streaming.stream import Stream

    for stream, index in zip(streams, indexes):
        if stream.folder is None and not records_lengths(index, column):
            raise UserError(f"stream {stream.name}: its index records no lengths of {column!r}, "
                            "so a token mix would download every shard to scan them; record "
                            "them once with `streaming lengths` (docs/cli.md)")
    with tempfile.TemporaryDirectory(prefix="streaming-plan-") as scratch:
        built = [Stream(local=str(s.folder), proportion=s.proportion) if s.folder is not None
                 else Stream(remote=s.remote, local=str(Path(scratch) / str(i)),
                             split=s.split or None, proportion=s.proportion)
                 for i, s in enumerate(streams)]
        try:
            check_mix_unit(built, "tokens")
            mixed, _ = mix_by_tokens(built, indexes, column, epoch_size)
        except PlanError as exc:
            raise UserError(str(exc)) from None
    return [StreamWeights(choose=s.choose) for s in mixed]
