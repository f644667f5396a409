"""Mixing streams by tokens (`mix_unit="tokens"`): stream proportions become token shares,
turned into per-stream `choose` counts before the epoch plan is built, and the shares an epoch
actually realises measured from its plan and the lengths."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from streaming.errors import PlanError
from streaming.plan.mixing_tokens import measured_token_shares, token_mix_counts

MIX_UNITS = ("samples", "tokens")


def mix_by_tokens(streams: Sequence[Any], mix_unit: str, column: str,
                  epoch_size: int | str | None) -> tuple[list[Any], int | str | None]:
    """(streams, epoch_size) for the planner: unchanged for "samples"; for "tokens", copies of
    the streams with `choose` counts whose expected tokens split as their proportions, and
    epoch_size None (the counts sum to the requested number of samples)."""
    if mix_unit not in MIX_UNITS:
        raise PlanError(f"mix_unit={mix_unit!r} is unknown; choose one of {list(MIX_UNITS)}")
    if mix_unit == "samples":
        return list(streams), epoch_size
    if not all(s.proportion is not None for s in streams):
        raise PlanError('mix_unit="tokens" needs a proportion on every stream')
    from streaming.format.index import read_index
    from streaming.packing.lengths import stream_lengths, stream_source
    from streaming.plan.mixing import parse_epoch_size

    tokens, samples = [], []
    for stream in streams:
        lengths = stream_lengths(stream_source(stream, read_index(stream.index_file())), column)
        tokens.append(int(lengths.sum()))
        samples.append(lengths.size)
    size = parse_epoch_size(epoch_size)
    total = int(sum(samples)) if size is None else size
    counts = token_mix_counts(tokens, samples, [s.proportion for s in streams],
                              epoch_samples=total)
    out = []
    for stream, count in zip(streams, counts.tolist()):
        twin = copy.copy(stream)
        twin.proportion, twin.choose = None, int(count)
        out.append(twin)
    return out, None


def token_shares(dataset: Any, epoch: int = 0, column: str | None = None) -> np.ndarray:
    """Share of tokens each stream contributes to `epoch` over every rank, measured on the
    epoch's plan (padding excluded) with the dataset's lengths."""
    from streaming.packing.lengths import load_lengths
    from streaming.plan import plan_node

    lengths = getattr(dataset, "lengths", None)
    if lengths is None or column is not None:
        lengths = load_lengths(dataset, column or getattr(dataset, "lengths_column", "tokens"))
    cfg, world = dataset.session.config_now(), dataset.world
    ids = [plan_node(cfg, world.with_position(node), epoch, 0).ids.reshape(-1)
           for node in range(world.num_nodes)]
    flat = np.concatenate(ids)
    flat = flat[flat >= 0]
    streams = dataset.stream_per_shard[dataset.spanner.locate(flat)[0]]
    return measured_token_shares(streams, lengths[flat], len(dataset.streams))
