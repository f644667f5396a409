"""Start-up of a dataset of many remote streams: seconds to construct a StreamingDataset over N
S3 streams (fresh cache folders), their index.json files fetched at once (the default, up to
`streaming.dataset.catalog.INDEX_FETCHES` in flight) against one after the other, and at once
with every index read by the vectorised scan (`streaming.format.index.SCAN_FROM` = 0; by
default small indexes are read by `json`), in the same run.

    .venv/bin/python benchmarks/many_streams.py [--streams 8 32 128] [--delay 0.05] [--rounds 3]
    .venv/bin/python benchmarks/many_streams.py --local [--streams 8 32 128] [--rounds 3]

The streams live on a loopback moto S3 server behind the test suite's fault proxy, which
answers every request after `--delay` seconds (a store's time to first byte, which loopback
does not have). Each stream is a small MDS dataset (100 samples, one shard). Each construction
runs in a fresh process (imports done before the clock starts); the three ways take turns in
each round and the medians and their ratios to one by one are printed. With `--local` the
remotes are local folders (copied into fresh cache folders), read one by one in the training
process (the default for such remotes) against on 16 threads. Prints only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from _delayed_s3 import delayed_s3  # noqa: E402

CHILD = r"""
import sys, tempfile, time
from streaming import Stream, StreamingDataset
from streaming.dataset import catalog
from streaming.format import index
streams, at_once, scanned = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
source = sys.argv[4]  # "s3://bench" or a local folder
if at_once:
    catalog.INDEX_FETCHES = at_once
if at_once > 1:  # threads even for local folders (by default those are read one by one)
    catalog.over_network = lambda stream: True
if scanned:
    index.SCAN_FROM = 0
root = tempfile.mkdtemp()
t0 = time.perf_counter()
ds = StreamingDataset(streams=[Stream(remote=f"{source}/s{k}", local=f"{root}/s{k}")
                               for k in range(streams)], batch_size=4)
print(time.perf_counter() - t0)
"""


def write(streams: int, folder: Path) -> None:
    from writers.mds import MDSWriter

    for k in range(streams):
        with MDSWriter(columns={"id": "int"}, out=str(folder / f"s{k}")) as writer:
            for i in range(100):
                writer.write({"id": 1000 * k + i})


def upload(client, streams: int, folder: Path) -> None:
    write(streams, folder)
    for k in range(streams):
        for path in (folder / f"s{k}").iterdir():
            client.upload_file(str(path), "bench", f"s{k}/{path.name}")


WAYS = {"one by one": (1, False), "at once": (0, False), "at once, scanned": (0, True)}
LOCAL_WAYS = {"one by one": (0, False), "16 threads": (16, False)}


def construct(env: dict, streams: int, way: tuple[int, bool], source: str) -> float:
    at_once, scanned = way
    out = subprocess.run([sys.executable, "-c", CHILD, str(streams), str(at_once),
                          "1" if scanned else "0", source], env=env, capture_output=True,
                         text=True, timeout=600, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def table(env: dict, counts: list[int], rounds: int, ways: dict, source: str) -> None:
    """Print the medians of `rounds` constructions per way and stream count."""
    print(f"{'streams':>7}" + "".join(f" {way:>18}" for way in ways) + "  (x of one by one)")
    for streams in counts:
        times: dict[str, list[float]] = {way: [] for way in ways}
        for r in range(rounds):
            for way in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
                times[way].append(construct(env, streams, ways[way], source))
        medians = {way: statistics.median(t) for way, t in times.items()}
        alone = medians["one by one"]
        print(f"{streams:>7}" + "".join(
            f" {m:>8.3f}s (x{m / alone:.2f})" for m in medians.values()), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, nargs="+", default=[8, 32, 128])
    p.add_argument("--delay", type=float, default=0.05, help="seconds per request")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--local", action="store_true",
                   help="remotes in local folders: one by one (the default) against 16 threads")
    args = p.parse_args()
    from streaming.dataset.catalog import INDEX_FETCHES

    if args.local:
        with tempfile.TemporaryDirectory() as tmp:
            write(max(args.streams), Path(tmp))
            print(f"remotes in local folders; medians of {args.rounds} rounds, seconds to "
                  "construct the dataset")
            table(dict(os.environ, PYTHONPATH=str(REPO)), args.streams, args.rounds,
                  LOCAL_WAYS, tmp)
        return
    with delayed_s3(args.delay) as (client, env):
        with tempfile.TemporaryDirectory() as tmp:
            upload(client, max(args.streams), Path(tmp))
        print(f"{args.delay * 1e3:.0f} ms per request; medians of {args.rounds} rounds, seconds "
              f"to construct the dataset; at once: up to {INDEX_FETCHES} index fetches in flight")
        table(env, args.streams, args.rounds, WAYS, "s3://bench")


if __name__ == "__main__":
    main()
