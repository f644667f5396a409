"""One GET that widens into parallel ranges, against its two fixed alternatives, on a fast link
and on links that cap each connection (as object stores do).

    .venv/bin/python benchmarks/widening.py [--rounds 5] [--caps 0 32 96]

The object is the first zstd shard of benchmarks/first_batch.py's corpus (~38 MB, 64 MiB raw),
served by a Range-honouring HTTP file server on loopback; a cap puts a pacing proxy
(tests/support/faultproxy.py, `bandwidth`, in a process of its own) in front of it, so every
connection gets at most that many MB/s and more connections get more. Each round times, in turns:
- `adaptive`: `stream_object` as the cache uses it (one GET, widened into parallel 8 MiB
  ranges once the consumer waits for bytes);
- `one GET`: `stream_object` with the range threshold above the object's size;
- `ranges`: 8 parallel 8 MiB ranges from the start, each handed over whole and in order (the
  fixed-range alternative: no judging, but the consumer waits for each whole part).
Two consumers: `decode` (the cache's incremental zstd decoder, the first-batch case) and
`collect` (no work: a transfer bound by the network only). Prints medians and adaptive / the
better fixed strategy; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO)]

MiB = 1 << 20


def consumer(kind: str) -> Callable[[bytes], None]:
    if kind == "collect":
        return lambda piece: None
    from streaming.format.compression import ZstdStream

    decoder = ZstdStream()
    return lambda piece: decoder.feed(piece)


def fixed_ranges(url: str, size: int, consume: Callable[[bytes], None]) -> None:
    """8 MiB ranges, 8 in flight from the start, each consumed whole once the ones before it
    are."""
    from streaming.storage.ranged import spans
    from streaming.storage.transfer import timed_backend

    backend, path = timed_backend(url, 60.0)
    with ThreadPoolExecutor(8) as pool:
        parts = [pool.submit(backend.get_range, path, lo, hi) for lo, hi in spans(size, 8 * MiB)]
        for part in parts:
            consume(part.result())


PROXY = """
import sys, time
from tests.support.faultproxy import FaultProxy
proxy = FaultProxy(sys.argv[1], bandwidth=float(sys.argv[2]), lifetime=3600)
print(proxy.endpoint, flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def pacing_proxy(upstream: str, cap: float) -> Iterator[str]:
    """A pacing proxy in its own process (so that it does not share our interpreter's lock);
    yields its endpoint."""
    proc = subprocess.Popen([sys.executable, "-c", PROXY, upstream, str(cap * 1e6)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(10)


def one_run(strategy: str, kind: str, url: str, size: int) -> float:
    from streaming.storage.streamed import stream_object

    consume = consumer(kind)
    began = time.perf_counter()
    if strategy == "adaptive":
        stream_object(url, consume, size=size)
    elif strategy == "one GET":
        stream_object(url, consume, size=size, range_threshold=size + 1)
    else:
        fixed_ranges(url, size, consume)
    return time.perf_counter() - began


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--caps", type=float, nargs="+", default=[0, 32, 96],
                   help="MB/s per connection (0: no proxy, loopback speed)")
    args = p.parse_args()
    from _targets import HTTPTarget
    from first_batch import prepare

    folder = prepare(20_000)["zstd"]
    shard = json.loads((folder / "index.json").read_text())["shards"][0]["zip_data"]
    target = HTTPTarget()
    try:
        target.put(folder / shard["basename"], shard["basename"])
        strategies = ("adaptive", "one GET", "ranges")
        print(f"{shard['bytes'] / 1e6:.1f} MB object; median seconds of {args.rounds} rounds")
        print(f"{'cap MB/s':>9} {'consumer':>8} " + " ".join(f"{s:>9}" for s in strategies)
              + f" {'adaptive / better fixed':>24}")
        for cap in args.caps:
            with (pacing_proxy(target.endpoint, cap) if cap
                  else contextlib.nullcontext(target.endpoint)) as base:
                url = f"{base}/bench/{shard['basename']}"
                for kind in ("decode", "collect"):
                    times = {s: [] for s in strategies}
                    for _ in range(args.rounds):
                        for s in strategies:
                            times[s].append(one_run(s, kind, url, shard["bytes"]))
                    med = {s: statistics.median(v) for s, v in times.items()}
                    best = min(med["one GET"], med["ranges"])
                    print(f"{cap or '-':>9} {kind:>8} "
                          + " ".join(f"{med[s]:>9.3f}" for s in strategies)
                          + f" {med['adaptive'] / best:>24.2f}", flush=True)
    finally:
        target.stop()


if __name__ == "__main__":
    main()
