"""How benchmarks/remote.py prints its results: one line per run, ratios of medians and round by
round, and the download phase against the GET ceiling."""

from __future__ import annotations

import numpy as np

MB = 1 << 20


def line(name: str, r: dict) -> str:
    if "error" in r:
        return f"  {name:<24} {r['error']}"
    rate = sps(r)
    notes = "; ".join(r.get("notes", []))
    return (f"  {name:<24} {rate:>9,.0f} samples/s {r['bytes'] / MB / r['seconds']:>7.1f} MB/s  "
            f"start-up {r['ready']:4.2f} s  first batch {r['first']:5.2f} s  "
            f"after start-up {data_sps(r):>7,.0f}/s  peak cache {r['peak_cache'] / MB:>4.0f} MB  "
            f"cpu {r['cpu']:4.1f} s + server "
            f"{r['server_cpu']:3.1f} s  {notes}")


def sps(r: dict | None) -> float | None:
    return None if not r or "error" in r else r["samples"] / r["seconds"]


def data_sps(r: dict) -> float:
    """Samples/s from the first iter() on: the epoch without imports and construction."""
    return r["samples"] / max(r["seconds"] - r["ready"], 1e-9)


def median(results: list[dict]) -> dict:
    """The run with the median samples/s (failed runs count as slowest)."""
    ranked = sorted(results, key=lambda r: sps(r) or 0.0)
    return ranked[(len(ranked) - 1) // 2]


def ratio(label: str, a: dict | None, b: dict | None,
           pairs: list[tuple[dict, dict]] | None = None) -> None:
    x = None if sps(a) is None or sps(b) is None else sps(a) / sps(b)
    print_ratio(label, x, [sps(p) / sps(q) if sps(p) and sps(q) else None
                            for p, q in pairs or []])


def print_ratio(label: str, x: float | None, each: list[float | None]) -> None:
    """One ratio line: the ratio of medians, then round by round (None: a failed round)."""
    per_round = ""
    if len(each) > 1:
        per_round = "  (" + ", ".join("failed" if v is None else f"x{v:.2f}" for v in each) + ")"
    if x is not None or per_round:
        print(f"    {label}: {'n/a' if x is None else f'x{x:.2f}'}{per_round}")


def ratio_after_startup(label: str, ours: list[dict], peer: list[dict]) -> None:
    """Median after-start-up rates (each system's own median run may differ), then per round."""
    def rates(runs: list[dict]) -> list[float]:
        return [data_sps(r) for r in runs if r and "error" not in r]

    a, b = rates(ours), rates(peer)
    if not a or not b:
        return
    each = [data_sps(p) / data_sps(q) if sps(p) and sps(q) else None
            for p, q in zip(ours, peer)]
    print_ratio(label, float(np.median(a)) / float(np.median(b)), each)


def download_phase(runs: list[dict], zip_mb: float, top: float) -> None:
    """Our download phase against the GET ceiling: from iter() until every shard was in the
    cache (seen from the loop, so at most one batch late), each unlimited round."""
    rates = [zip_mb / (r["marks"]["all_shards_in"] - r["ready"]) for r in runs
             if "error" not in r and "all_shards_in" in r.get("marks", {})]
    if rates:
        each = ", ".join(f"{rate:,.0f} MB/s = x{rate / top:.2f}" for rate in rates)
        print(f"    ours, download phase (iter() to the last shard in): {each} of the GET "
              "ceiling")
