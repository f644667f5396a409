"""The meter's recent figures span at least `recent_s` (since the start before then), from its
newest snapshot that old; it keeps a snapshot when told something `recent_s` after the last."""

from __future__ import annotations

import pytest

from streaming.observe.metrics import Meter

S = 1_000_000_000  # ns per second


def _recent(meter: Meter, at_s: float) -> tuple[float, float, float]:
    m = meter.as_dict(now_ns=meter.started_ns + int(at_s * S))
    return m["recent_batches_per_s"], m["recent_samples_per_s"], m["recent_data_wait_s"]


def test_recent_figures_run_from_the_newest_snapshot_old_enough():
    meter = Meter(recent_s=1.0)
    meter.start()
    t0 = meter.started_ns
    meter.add(10, 100, S // 10, t0 + S // 2)
    assert _recent(meter, 0.6) == pytest.approx((10 / 0.6, 100 / 0.6, 0.01))  # from the start
    meter.add(10, 100, 0, t0 + 12 * S // 10)  # 1.2 s after the start: a snapshot
    assert _recent(meter, 1.5) == pytest.approx((20 / 1.5, 200 / 1.5, 0.005))  # still from 0
    meter.add(5, 50, S, t0 + 2 * S)  # 0.8 s after the snapshot: none
    assert _recent(meter, 2.5) == pytest.approx((5 / 1.3, 50 / 1.3, 0.2))  # from 1.2 s
    assert _recent(meter, 20.0) == pytest.approx((5 / 18.8, 50 / 18.8, 0.2))  # a stalled loop
    meter.add(1, 10, 0, t0 + 21 * S)  # told late: a snapshot, the recent span from 1.2 s on
    assert _recent(meter, 21.5) == pytest.approx((6 / 20.3, 60 / 20.3, 1 / 6))
    assert _recent(meter, 22.0) == (0.0, 0.0, 0.0)  # from 21 s: no step since


def test_totals_and_first_step_do_not_depend_on_snapshots():
    meter = Meter(recent_s=1.0)
    meter.start()
    t0 = meter.started_ns
    for k in range(1, 31):
        meter.add(1, 8, S // 100, t0 + k * S // 10)
    m = meter.as_dict(now_ns=t0 + 3 * S)
    assert m["first_batch_s"] == pytest.approx(0.1)
    assert (m["batches"], m["samples"]) == (30, 240)
    assert m["data_wait_s"] == pytest.approx(0.3)
    assert m["data_wait_fraction"] == pytest.approx(0.1)
    assert m["samples_per_s"] == pytest.approx(80.0)
    assert m["recent_samples_per_s"] == pytest.approx(80.0)  # snapshots at 1 s and 2 s: from 2 s
