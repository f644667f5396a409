"""Mixing streams by tokens rather than samples (`mix_unit="tokens"`): per-stream sample counts
that realise token proportions, and the token shares a given set of counts realises. Pure numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from streaming.errors import PlanError


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
    """Expected share of tokens each stream contributes when `counts` samples are drawn."""
    tok, cnt, _ = _stream_arrays(stream_tokens, stream_samples)
    draws = np.asarray(counts, dtype=np.float64).reshape(-1)
    if draws.shape != tok.shape or (draws < 0).any():
        raise PlanError(f"counts must be {tok.size} non-negative numbers, got {draws.tolist()}")
    mean = np.divide(tok, cnt, out=np.zeros_like(tok), where=cnt > 0)
    mass = draws * mean
    total = mass.sum()
    return mass / total if total > 0 else mass


def measured_token_shares(stream_ids: Any, lengths: Any, num_streams: int) -> np.ndarray:
    """Share of tokens per stream actually seen, from each drawn sample's stream and length."""
    ids = np.asarray(stream_ids, dtype=np.int64).reshape(-1)
    lens = np.asarray(lengths, dtype=np.float64).reshape(-1)
    if ids.shape != lens.shape:
        raise PlanError(f"stream_ids ({ids.size}) and lengths ({lens.size}) differ in size")
    if ids.size and (ids.min() < 0 or ids.max() >= num_streams):
        raise PlanError(f"stream ids must lie in [0, {num_streams})")
    mass = np.bincount(ids, weights=lens, minlength=num_streams)
    total = mass.sum()
    return mass / total if total > 0 else mass
