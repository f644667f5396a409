"""Mixing streams by tokens rather than samples (`mix_unit="tokens"`), in one place: the pure
arithmetic (per-stream sample counts that realise token proportions, and the token shares a set
of counts or an epoch's samples realise) and its use by the dataset (stream proportions turned
into per-stream `choose` counts before the epoch plan is built, and the shares an epoch actually
realises measured from its plan and the lengths)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from streaming.errors import PlanError
from streaming.format.index import DatasetIndex

MIX_UNITS = ("samples", "tokens")


def _stream_arrays(
    tokens: Any, samples: Any, proportions: Any | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    tok = np.asarray(tokens, dtype=np.float64).reshape(-1)
    cnt = np.asarray(samples, dtype=np.float64).reshape(-1)
    if tok.size == 0 or tok.shape != cnt.shape:
        raise PlanError(
            f"stream_tokens ({tok.size}) and stream_samples ({cnt.size}) must be non-empty and "
            "the same size"
        )
    if (tok < 0).any() or (cnt < 0).any() or ((cnt == 0) & (tok > 0)).any():
        raise PlanError("stream token and sample counts must be >= 0 (tokens need samples)")
    if proportions is None:
        return tok, cnt, None
    prop = np.asarray(proportions, dtype=np.float64).reshape(-1)
    if prop.shape != tok.shape:
        raise PlanError(f"proportions has {prop.size} entries for {tok.size} streams")
    if not np.isfinite(prop).all() or (prop < 0).any() or prop.sum() <= 0:
        raise PlanError(f"proportions must be finite, >= 0 and not all zero, got {prop.tolist()}")
    empty = (prop > 0) & (tok == 0)
    if empty.any():
        raise PlanError(f"streams {np.flatnonzero(empty).tolist()} have a proportion but no tokens")
    return tok, cnt, prop / prop.sum()


def _largest_remainder(weights: np.ndarray, total: int) -> np.ndarray:
    """Integers proportional to `weights` summing to `total` (ties go to lower stream index)."""
    exact = weights / weights.sum() * total
    counts = np.floor(exact).astype(np.int64)
    short = total - int(counts.sum())
    if short > 0:
        order = np.lexsort((np.arange(exact.size), -(exact - counts)))
        counts[order[:short]] += 1
    return counts


def token_mix_counts(
    stream_tokens: Any,
    stream_samples: Any,
    proportions: Any,
    *,
    epoch_tokens: int | None = None,
    epoch_samples: int | None = None,
) -> np.ndarray:
    """Samples to draw from each stream so that tokens split as `proportions` (normalised).

    Give exactly one epoch size: `epoch_tokens` (counts are rounded per stream, so the total is
    within one average sample per stream of it) or `epoch_samples` (counts sum exactly to it).

    Args:
        stream_tokens: Total tokens of each stream.
        stream_samples: Samples of each stream.
        proportions: Wanted token share of each stream (any non-negative scale).
        epoch_tokens: Tokens in the epoch; None when `epoch_samples` is given.
        epoch_samples: Samples in the epoch; None when `epoch_tokens` is given.
    """
    if (epoch_tokens is None) == (epoch_samples is None):
        raise PlanError("give exactly one of epoch_tokens and epoch_samples")
    tok, cnt, prop = _stream_arrays(stream_tokens, stream_samples, proportions)
    assert prop is not None
    mean = np.divide(tok, cnt, out=np.zeros_like(tok), where=cnt > 0)
    weights = np.divide(prop, mean, out=np.zeros_like(prop), where=mean > 0)
    if epoch_tokens is not None:
        if epoch_tokens < 0:
            raise PlanError(f"epoch_tokens must be >= 0, got {epoch_tokens}")
        return np.rint(weights * epoch_tokens).astype(np.int64)
    if epoch_samples < 0:
        raise PlanError(f"epoch_samples must be >= 0, got {epoch_samples}")
    return _largest_remainder(weights, int(epoch_samples))


def realised_token_shares(counts: Any, stream_tokens: Any, stream_samples: Any) -> np.ndarray:
    """Expected share of tokens each stream contributes when `counts` samples are drawn.

    Args:
        counts: Samples drawn from each stream (non-negative).
        stream_tokens: Total tokens of each stream.
        stream_samples: Samples of each stream.
    """
    tok, cnt, _ = _stream_arrays(stream_tokens, stream_samples)
    draws = np.asarray(counts, dtype=np.float64).reshape(-1)
    if draws.shape != tok.shape or (draws < 0).any():
        raise PlanError(f"counts must be {tok.size} non-negative numbers, got {draws.tolist()}")
    mean = np.divide(tok, cnt, out=np.zeros_like(tok), where=cnt > 0)
    mass = draws * mean
    total = mass.sum()
    return mass / total if total > 0 else mass


def measured_token_shares(stream_ids: Any, lengths: Any, num_streams: int) -> np.ndarray:
    """Share of tokens per stream actually seen, from each drawn sample's stream and length.

    Args:
        stream_ids: The stream (0 .. num_streams - 1) of each drawn sample.
        lengths: The tokens of each drawn sample, aligned with `stream_ids`.
        num_streams: Number of streams (the length of the result).
    """
    ids = np.asarray(stream_ids, dtype=np.int64).reshape(-1)
    lens = np.asarray(lengths, dtype=np.float64).reshape(-1)
    if ids.shape != lens.shape:
        raise PlanError(f"stream_ids ({ids.size}) and lengths ({lens.size}) differ in size")
    if ids.size and (ids.min() < 0 or ids.max() >= num_streams):
        raise PlanError(f"stream ids must lie in [0, {num_streams})")
    mass = np.bincount(ids, weights=lens, minlength=num_streams)
    total = mass.sum()
    return mass / total if total > 0 else mass


def check_mix_unit(streams: Sequence[Any], mix_unit: str) -> None:
    """A PlanError for an unknown `mix_unit`, or for "tokens" without a proportion on every
    stream.

    Args:
        streams: the dataset's streams.
        mix_unit: "samples" or "tokens".
    """
    if mix_unit not in MIX_UNITS:
        raise PlanError(f"mix_unit={mix_unit!r} is unknown; choose one of {list(MIX_UNITS)}")
    if mix_unit == "tokens" and not all(s.proportion is not None for s in streams):
        raise PlanError('mix_unit="tokens" needs a proportion on every stream')


def mix_by_tokens(streams: Sequence[Any], indexes: Sequence[DatasetIndex], column: str,
                  epoch_size: int | str | None) -> tuple[list[Any], int | str | None]:
    """(streams, epoch_size) for the planner under `mix_unit="tokens"`: copies of the streams with
    `choose` counts whose expected tokens split as their proportions, and epoch_size None (the
    counts sum to the requested number of samples). The streams' sample lengths come from
    their side files (fetched at once where not local yet) or a scan of their shards.

    Args:
        streams: the dataset's streams, each with a proportion.
        indexes: each stream's index, read already.
        column: the token column whose lengths count.
        epoch_size: the samples asked for an epoch (None: every stream's samples).
    """
    from streaming.dataset.lengths import per_stream_lengths, stream_source
    from streaming.plan.mixing import parse_epoch_size

    lengths = per_stream_lengths([stream_source(stream, index)
                                  for stream, index in zip(streams, indexes)], column)
    tokens = [int(one.sum()) for one in lengths]
    samples = [one.size for one in lengths]
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
    from streaming.dataset.lengths import load_lengths
    from streaming.plan import plan_node

    lengths = getattr(dataset, "lengths", None)
    if lengths is None or column is not None:
        lengths = load_lengths(dataset, column or getattr(dataset, "lengths_column", "tokens"))
    cfg, world = dataset.session.plans.config_now(), dataset.world
    ids = [plan_node(cfg, world.with_position(node), epoch, 0).ids.reshape(-1)
           for node in range(world.num_nodes)]
    flat = np.concatenate(ids)
    flat = flat[flat >= 0]
    streams = dataset.stream_per_shard[dataset.spanner.locate(flat)[0]]
    return measured_token_shares(streams, lengths[flat], len(dataset.streams))
