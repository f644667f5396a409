"""Which samples each canonical unit serves under the stream-shaped batching methods.

A unit (canonical node c) owns a fixed block of slots in every global batch and so needs
`demand[c, s]` samples of stream s in the epoch; it holds `counts[c, s]` of them (its picks).
It serves its own first min(demand, counts) (in piece order) and the rest is pooled: the
surpluses of all units, in canonical order, are handed out in order to the units' deficits in
canonical order. A unit therefore reads its own canonical node and the few lenders whose
surplus meets its deficit; what nobody needs is the epoch's leftover. Borrowed samples come
from a lender's picks, which are cheap to compute (no shuffle), so a node's cost stays its
share. Every choice depends on the canonical node count and the global batch only, never on
the number of physical nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from streaming.plan.shuffle.pieces import expand_runs

if TYPE_CHECKING:
    from streaming.plan.traits import EpochView

_UNIT_SHUFFLE_TAG = 0x5E11


@dataclass(frozen=True)
class Request:
    """Rows [lo, hi) of canonical node `source`'s stream-`stream` picks go to `unit`."""

    unit: int
    stream: int
    source: int
    lo: int
    hi: int


def requests(counts: np.ndarray, demand: np.ndarray, units: list[int]) -> list[Request]:
    """The requests that fill `units`' demand, each unit's own rows first, then its loans in
    pool order.

    Args:
        counts: int64 [C, S] picks of each stream in each canonical node.
        demand: int64 [C, S] samples of each stream each unit serves (column sums at most the
            column sums of `counts`).
        units: the canonical units asked for.
    """
    keep = np.minimum(counts, demand)
    surplus, deficit = counts - keep, demand - keep
    out: list[Request] = []
    for s in range(counts.shape[1]):
        lenders = np.flatnonzero(surplus[:, s])
        ends = np.cumsum(surplus[lenders, s])
        starts = ends - surplus[lenders, s]
        debt = np.cumsum(deficit[:, s]) - deficit[:, s]
        for c in units:
            if keep[c, s]:
                out.append(Request(c, s, c, 0, int(keep[c, s])))
            lo, hi = int(debt[c]), int(debt[c] + deficit[c, s])
            k = int(np.searchsorted(ends, lo, side="right"))
            while lo < hi:
                take = min(hi, int(ends[k])) - lo
                source, offset = int(lenders[k]), lo - int(starts[k]) + int(keep[lenders[k], s])
                out.append(Request(c, s, source, offset, offset + take))
                lo, k = lo + take, k + 1
    return out


def _cut(ids: np.ndarray, bounds: np.ndarray, streams: np.ndarray, req: Request
         ) -> tuple[np.ndarray, np.ndarray]:
    """The requested rows of a source's stream picks (`ids` grouped by piece within `bounds`,
    pieces of stream `streams`) and the lengths of the pieces they span."""
    pieces = np.flatnonzero(streams == req.stream)
    lengths = bounds[pieces + 1] - bounds[pieces]
    ends = np.cumsum(lengths)
    lo = np.maximum(ends - lengths, req.lo)
    hi = np.minimum(ends, req.hi)
    keep = hi > lo
    starts = bounds[pieces[keep]] + lo[keep] - (ends - lengths)[keep]
    taken = hi[keep] - lo[keep]
    return ids[expand_runs(starts, taken)], taken


def gather(order: EpochView, reqs: list[Request]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each request's ids and piece lengths; every source's picks are built once.

    Args:
        order: the epoch whose canonical nodes' picks are cut.
        reqs: the requests, as `requests` returns them.
    """
    out: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0, np.int64), np.empty(0, np.int64))
                                                ] * len(reqs)
    by_source: dict[int, list[int]] = {}
    for i, req in enumerate(reqs):
        by_source.setdefault(req.source, []).append(i)
    for source, indices in sorted(by_source.items()):
        ids, bounds = order.picks(source)
        streams = order.layout.stream[order.layout.pieces_of(source)]
        for i in indices:
            out[i] = _cut(ids, bounds, streams, reqs[i])
        del ids
    return out


def unit_streams(order: EpochView, demand: np.ndarray, units: list[int]
                 ) -> dict[int, list[np.ndarray]]:
    """For each unit, each stream's `demand` samples in the order the unit serves them.

    Args:
        order: the epoch (its layout, picks and shuffle settings).
        demand: int64 [C, S] samples of each stream each unit serves.
        units: the canonical units asked for.
    """
    cfg = order.cfg
    reqs = requests(order.stream_counts, demand, units)
    parts = gather(order, reqs)
    grouped: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {}
    for req, part in zip(reqs, parts):
        grouped.setdefault((req.unit, req.stream), []).append(part)
    out: dict[int, list[np.ndarray]] = {}
    for c in units:
        streams = []
        for s in range(demand.shape[1]):
            mine = grouped.pop((c, s), [])
            if not mine:
                streams.append(np.empty(0, dtype=np.int64))
                continue
            values = np.concatenate([ids for ids, _ in mine])
            if cfg.shuffle and len(values) > 1:
                bounds = np.concatenate(([0], np.cumsum(np.concatenate([n for _, n in mine]))))
                rng = np.random.default_rng([cfg.shuffle_seed, order.epoch, c, s,
                                             _UNIT_SHUFFLE_TAG])
                values = cfg.shuffle_algorithm.shuffle(values, bounds, rng,
                                                       cfg.block_size(order.num_canonical))
            streams.append(values)
        out[c] = streams
    return out
