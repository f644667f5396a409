"""Bytes a node downloads under a cache_limit, against the floor (each shard its epoch reads,
fetched once) and the Belady optimum for its plan, and epoch time against the same epoch
without a limit, measured in the same run.

    .venv/bin/python benchmarks/cache_egress.py            # 24k samples per stream
    .venv/bin/python benchmarks/cache_egress.py --quick    # 6k samples per stream

One process with 2 DataLoader workers, batch 16, py1e, zstd shards, a local-folder remote (the
bytes a download moves are the same as from object storage; the time is not). Limits: 25% and
50% of the raw data, and twice the minimum `streaming plan` states. Not measured here: several
ranks and nodes (tests/cli/test_plan_cost.py runs those on loopback S3). The reference
(mosaicml-streaming) runs the same epochs over the same files with the same limit in its own
venv (`--reference PYTHON`, default .venv-reference/bin/python when it exists), its downloads
counted by benchmarks/peers/reference_egress.py, against our epoch's floor. It runs with its
default shuffle_block_size and predownload; an epoch of it still running after
`--reference-timeout` seconds (default 300) is stopped, and what it downloaded until then is
printed as a lower bound (">= x...", with the share of the epoch it had delivered).
`--config NAME` (repeatable) runs only the named configs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streaming import Stream, StreamingDataLoader, StreamingDataset  # noqa: E402
from streaming.cache.policy.egress_bounds import belady_egress, floor_egress  # noqa: E402
from streaming.cache.shard_facts import ShardFacts  # noqa: E402
from streaming.format.index import read_index  # noqa: E402
from streaming.observe.forecast import RunSpec, job_minimum, reader_sequences  # noqa: E402
from streaming.plan import World  # noqa: E402
from tests.support.datasets import write_dataset  # noqa: E402

WORKERS = 2
CONFIGS = {  # name: (streams, proportions, epoch_size as a share of the stored samples)
    "full epoch": (1, None, None),
    "epoch_size 30%": (1, None, 0.3),
    "70/30 mix, epoch_size 50%": (2, (0.7, 0.3), 0.5),
    "epoch_size 2x": (1, None, 2.0),
}


def _streams(sources: list[Path], local: Path, proportions) -> list[Stream]:
    shutil.rmtree(local, ignore_errors=True)
    return [Stream(remote=str(s), local=str(local / s.name),
                   proportion=None if proportions is None else proportions[i])
            for i, s in enumerate(sources)]


def _epoch(streams: list[Stream], limit: int | None, epoch_size: int | None):
    start = time.perf_counter()
    ds = StreamingDataset(streams=streams, cache_limit=limit, batch_size=16, shuffle=True,
                          epoch_size=epoch_size)
    for _ in StreamingDataLoader(ds, batch_size=16, num_workers=WORKERS):
        pass
    seconds = time.perf_counter() - start
    ds.close()
    return ds, seconds


def _fetch(sources: list[Path]) -> np.ndarray:
    return ShardFacts.from_indexes([read_index(s) for s in sources]).fetch_bytes


def reference_epoch(python: str | None, sources: list[Path], local: Path, proportions,
                    epoch_size: int | None, limit: int, floor: int, timeout: float) -> str:
    """The reference's downloads for the same epoch and limit against `floor`, as a table cell.

    An epoch still running after `timeout` seconds is stopped (SIGTERM, then SIGKILL to its
    process group) and the bytes it downloaded until then are given as a lower bound, with the
    share of the epoch's samples it had delivered."""
    if python is None:
        return "not run"
    shutil.rmtree(local, ignore_errors=True)
    local.mkdir(parents=True)
    log, progress = local / "downloads.log", local / "progress.log"
    spec = {"streams": [{"remote": str(s), "local": str(local / s.name),
                         "proportion": None if proportions is None else proportions[i]}
                        for i, s in enumerate(sources)],
            "batch": 16, "workers": WORKERS, "limit": limit, "epoch_size": epoch_size,
            "shuffle_algo": "py1e", "log": str(log), "progress": str(progress)}
    with open(local / "stdout", "w+") as out, open(local / "stderr", "w+") as err:
        child = subprocess.Popen([python, str(ROOT / "benchmarks/peers/reference_egress.py"),
                                  json.dumps(spec)], stdout=out, stderr=err,
                                 start_new_session=True)
        try:
            child.wait(timeout=timeout)
            stopped = False
        except subprocess.TimeoutExpired:
            stopped = True
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if not stopped and child.returncode != 0:
        last = (stderr.strip().splitlines() or ["failed"])[-1]
        return "refused" if "cache limit" in last.lower() else f"failed: {last[:60]}"
    got = sum(int(x) for x in log.read_text().split()) if log.exists() else 0
    if not stopped:
        got = json.loads(stdout.strip().splitlines()[-1])["bytes"]
        return f"x{got / floor:.2f}"
    lines = progress.read_text().split() if progress.exists() else []
    total = epoch_size or sum(int(read_index(s).samples_per_shard.sum()) for s in sources)
    done = int(lines[-1]) / total if lines else 0.0
    return f">= x{got / floor:.2f} (stopped after {timeout:.0f} s, {done:.0%} of the epoch)"


def run_config(name: str, sources: list[Path], local: Path, samples: int,
               reference: str | None, timeout: float) -> list[str]:
    count, proportions, share = CONFIGS[name]
    used = sources[:count]
    size = None if share is None else int(samples * count * share)
    data = sum(int(read_index(s).raw_bytes.sum()) for s in used)
    free, free_seconds = _epoch(_streams(used, local, proportions), None, size)
    fetch = _fetch(used)
    spec = RunSpec(free.config, World(workers_per_rank=WORKERS), free.catalog.footprint(),
                   fetch, None, free.predownload,
                   other_bytes=free.catalog.cache_other_bytes())  # the minimum the dataset checks
    minimum = job_minimum(spec).bytes
    rows = []
    for label, limit in (("25%", data // 4), ("50%", data // 2), ("2x min", 2 * minimum)):
        if limit < minimum:
            rows.append(f"| {name} | {label} | under the minimum ({minimum} B) | | | | |")
            continue
        ds, seconds = _epoch(_streams(used, local, proportions), limit, size)
        got = ds.cache_stats().bytes_downloaded
        readers = reader_sequences(ds.config, World(workers_per_rank=WORKERS), 0, 0)
        footprint = ds.catalog.footprint()
        floor = floor_egress(readers, footprint, fetch).bytes
        best = belady_egress(readers, footprint, fetch, limit).bytes
        ref = reference_epoch(reference, used, local / "reference", proportions, size, limit,
                              floor, timeout)
        rows.append(f"| {name} | {label} ({limit / data:.0%}) | x{got / floor:.2f} | "
                    f"x{got / best:.2f} | x{best / floor:.2f} | {ref} | "
                    f"x{free_seconds / seconds:.2f} |")
    return rows


def shuffle_span(sources: list[Path], local: Path, samples: int) -> list[str]:
    """One stream at a 25% limit: the block the limit fits, and 2x, 4x and 8x it given as
    shuffle_block_size: how far samples move against what the epoch downloads."""
    used = sources[:1]
    data = int(read_index(used[0]).raw_bytes.sum())
    fetch = _fetch(used)
    rows, fitted = [], None
    for factor in (1, 2, 4, 8):
        block = None if fitted is None else fitted * factor
        start = time.perf_counter()
        ds = StreamingDataset(streams=_streams(used, local, None), cache_limit=data // 4,
                              batch_size=16, shuffle=True, shuffle_block_size=block)
        for _ in StreamingDataLoader(ds, batch_size=16, num_workers=WORKERS):
            pass
        seconds = time.perf_counter() - start
        ds.close()
        fitted = fitted or int(ds.config.shuffle_block_size)
        size = int(ds.config.shuffle_block_size)
        per_shard = float(ds.config.epoch_samples_per_shard.mean())
        readers = reader_sequences(ds.config, World(workers_per_rank=WORKERS), 0, 0)
        floor = floor_egress(readers, ds.catalog.footprint(), fetch).bytes
        got = ds.cache_stats().bytes_downloaded
        rows.append(f"| {size} ({size / per_shard:.1f} shards){' fitted' if factor == 1 else ''}"
                    f" | x{got / floor:.2f} | {seconds:.1f} s |")
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="6k samples per stream")
    p.add_argument("--shuffle-span", action="store_true",
                   help="the trade-off table: larger blocks at a 25%% limit")
    default = ROOT / ".venv-reference" / "bin" / "python"
    p.add_argument("--reference", default=str(default) if default.exists() else None,
                   help="the reference's venv Python (default .venv-reference/bin/python)")
    p.add_argument("--no-reference", action="store_true", help="leave the reference out")
    p.add_argument("--reference-timeout", type=float, default=300, metavar="SECONDS",
                   help="stop a reference epoch after this long and report its downloads until "
                        "then as a lower bound (default 300)")
    p.add_argument("--config", action="append", choices=list(CONFIGS), metavar="NAME",
                   help="run only this config (repeatable): " + ", ".join(CONFIGS))
    args = p.parse_args()
    reference = None if args.no_reference else args.reference
    samples = 6_000 if args.quick else 24_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sources = []
        for name in ("a", "b"):
            write_dataset(root / name, samples, size_limit=128 << 10)
            sources.append(root / name)
        if args.shuffle_span:
            print("| shuffle block (samples) | downloaded / floor | epoch |")
            print("|---|---|---|")
            for row in shuffle_span(sources, root / "local", samples):
                print(row, flush=True)
            return 0
        print("| config | limit (of the raw data) | downloaded / floor | / Belady | Belady / "
              "floor | reference / floor | speed vs no limit |")
        print("|---|---|---|---|---|---|---|")
        for name in args.config or CONFIGS:
            for row in run_config(name, sources, root / "local", samples, reference,
                                  args.reference_timeout):
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
