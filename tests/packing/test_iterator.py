"""PackedIterator: every token delivered once, in order per sample, and exact resumption."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.errors import PlanError, StateMismatchError
from streaming.packing.collate import PackCollator
from streaming.packing.iterator import PackedIterator


def make_source(lengths, repeat_every: int = 0):
    """Samples whose tokens encode (sample id, position) so any misplacement is visible."""
    out = []
    for i, n in enumerate(lengths):
        if repeat_every and i and i % repeat_every == 0:
            out.append(out[0])  # the same sample again: it must be packed again
        else:
            out.append((1000 + i, {"tokens": np.arange(n, dtype=np.int32) + 100_000 * i}))
    return out


def build(source, **kw):
    options = {"packing_length": 32, "buffer_size": 8, "batch_size": 2,
               "collator": PackCollator(32, pad=True)}
    return PackedIterator(source, **{**options, **kw})


def real_sequences(batches):
    seqs = []
    for batch in batches:
        flat = batch["input_ids"].reshape(-1).tolist()
        cu = batch["cu_seqlens"].tolist()
        pads = batch["seq_is_pad"].tolist()
        seqs += [tuple(flat[a:b]) for a, b, p in zip(cu[:-1], cu[1:], pads) if not p]
    return seqs


OPTIONS = [
    {"filter_overlong": True},
    {"filter_overlong": False, "overlong": "split"},
    {"filter_overlong": False, "overlong": "alone"},
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("strategy", ["first_fit", "window_5", "best_fit"])
def test_every_sample_is_delivered_once_and_split_pieces_in_order(strategy, options):
    lengths = np.random.default_rng(1).integers(0, 80, 150).tolist()
    source = make_source(lengths, repeat_every=7)
    got = real_sequences(build(source, strategy=strategy, **options))
    expected = [tuple(s["tokens"].tolist()) for _, s in source if s["tokens"].size]
    if options["filter_overlong"]:
        expected = [s for s in expected if len(s) <= 32]
    if options.get("overlong") == "split":
        # a split sample arrives as pieces of consecutive tokens: glue them back together
        runs: list[list[int]] = []
        for piece in sorted(got):
            run = next((r for r in runs if r[-1] + 1 == piece[0]), None)
            if run is None:
                runs.append(list(piece))
            else:
                run.extend(piece)
        got = [tuple(r) for r in runs]
    assert sorted(got) == sorted(expected)


@given(st.lists(st.integers(0, 70), max_size=80), st.sampled_from(OPTIONS),
       st.sampled_from(["first_fit", "window_4", "best_fit"]), st.data())
def test_resume_anywhere_yields_the_same_remaining_batches(lengths, options, strategy, data):
    source = make_source(lengths, repeat_every=5)
    full = [b["input_ids"].tolist() for b in build(source, strategy=strategy, **options)]
    cut = data.draw(st.integers(0, len(full)))
    first = build(source, strategy=strategy, **options)
    stream = iter(first)
    head = [next(stream)["input_ids"].tolist() for _ in range(cut)]
    state = first.state_dict()
    # way 1: same source again, consumed items are skipped
    again = build(source, strategy=strategy, **options)
    again.load_state_dict(state)
    assert head + [b["input_ids"].tolist() for b in again] == full
    # way 2: a source already positioned after the consumed items, held samples refetched
    by_id = dict(source)
    resumed = build(source[state["consumed"]:], strategy=strategy, skip_consumed=False,
                    lookup=by_id.__getitem__, **options)
    resumed.load_state_dict(state)
    assert head + [b["input_ids"].tolist() for b in resumed] == full


def test_unbatched_iteration_yields_one_dimensional_packs():
    packs = list(PackedIterator(make_source([5, 9, 30, 2]), packing_length=32))
    assert all(p["input_ids"].dim() == 1 for p in packs)
    assert sum(int(p["pack_lengths"].sum()) for p in packs) == 46


def test_drop_last_keeps_only_full_batches():
    source = make_source([20] * 7)  # one sample per pack: 7 packs
    sizes = [b["input_ids"].shape[0] for b in build(source, batch_size=3)]
    assert sizes == [3, 3, 1]
    assert [b["input_ids"].shape[0] for b in build(source, batch_size=3, drop_last=True)] == [3, 3]


def test_bad_input_is_named():
    with pytest.raises(PlanError, match="column 'tokens'"):
        list(PackedIterator([(3, {"text": "hi"})], packing_length=8))
    with pytest.raises(PlanError, match="token ids"):
        list(PackedIterator([(3, {"tokens": np.ones(3)})], packing_length=8))
    it = PackedIterator(make_source([40]), packing_length=32, skip_consumed=False)
    with pytest.raises(StateMismatchError, match="lookup"):
        it.load_state_dict({"packer": {}, "ready": [], "held": [[0, 1]], "offsets": [],
                            "consumed": 1})
