"""Cold-cache epochs from S3 (a loopback moto server): ours, mosaicml-streaming and LitData on
the same bucket in the same run, without and with a cache limit of 25% of the dataset.

    .venv/bin/python benchmarks/remote.py            # ~240 MB token + ~250 MB blob corpus, zstd
    .venv/bin/python benchmarks/remote.py --quick    # ~80 MB each
    .venv/bin/python benchmarks/remote.py --full     # ~1 GB each: start-up weighs less
    .venv/bin/python benchmarks/remote.py --corpus tokens --no-peers
    .venv/bin/python benchmarks/remote.py --backend gcs --quick   # or azure, http (ours only)

Every system runs the same loop in its own process and venv: a DataLoader with 2 workers, batch
64, shuffle on, a fresh cache folder, one full epoch (samples/s, payload MB/s, time to first batch,
peak bytes in the cache folder). Unlimited epochs run --rounds times, the systems taking turns,
and each system's median run is compared (single runs here drift by tens of percent), then
the medians of each system's rates after start-up (from iter(), without imports and dataset
construction). Before
each epoch the system's packages are imported once in a throwaway process, so no system pays for
reading torch from a cold disk.
Peers come from .bench-venvs (benchmarks/peers/setup.sh); a peer
that fails, stops making progress for --stall seconds or runs past --wall seconds is killed
and reported, not fatal. The ceilings are measured in the same run on the same objects:
parallel ranged GETs, and fetch+decompress with a thread pool and nothing else; the cache
engine alone (in order, no loader) shows what the cache costs. Absolute numbers vary between
machines; read the ratios. With --backend gcs|azure|http the same corpora are served by that
store's emulator (gcp-storage-emulator, Azurite, a Range-honouring file server) and only this
project runs; its fraction of that store's own ranged-GET ceiling (fetched with the store's own
client) is what compares across backends, since the emulators differ in speed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import BENCH_DATA, Corpus, blob_corpus, token_corpus
from _report import (
    data_sps,
    download_phase,
    line,
    median,
    ratio,
    ratio_after_startup,
    sps,
)
from _targets import BUCKET, TARGETS, Target

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.prepare.preparer import ShardPreparer
from streaming.cache.shard_facts import ShardFacts
from streaming.format.index import read_index
from streaming.format.shard import ShardReader
from streaming.read.sample_locator import SampleLocator
from streaming.stream import Stream
from writers.mds import MDSWriter

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "benchmarks" / "peers"
VENVS = ROOT / ".bench-venvs"
MB = 1 << 20
SHARD_SIZE = "8mb"  # small enough that even --quick has tens of shards to pipeline
SHARD_BYTES = 8 * MB  # the same, for LitData's chunk_bytes
PART = 8 * MB
BLOCK_SHARDS = 4  # shards' worth of samples in the shuffle block of the "ours, block" row
WORKERS, BATCH = 2, 64
# corpus kind -> (generator, {size: samples}, payload column)
CORPORA = {"tokens": (token_corpus, {"quick": 20_000, "default": 60_000, "full": 250_000},
                      "tokens"),
           "blobs": (blob_corpus, {"quick": 800, "default": 2_500, "full": 10_000}, "blob")}


def build(kind: str, size: str) -> tuple[Corpus, Path]:
    """The corpus and its zstd MDS copy (written once, kept in bench-data/)."""
    make, sizes, _ = CORPORA[kind]
    samples = sizes[size]
    corpus = make(samples=samples)
    out = BENCH_DATA / "remote" / f"{kind}-{samples}-{SHARD_SIZE}"
    if not (out / "index.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        with MDSWriter(columns=corpus.columns, out=out, compression="zstd",
                       size_limit=SHARD_SIZE) as writer:
            for sample in corpus:
                writer.write(sample)
    return corpus, out


def upload(target: Target, folder: Path, prefix: str) -> list[tuple[str, int]]:
    """Put every file of `folder` under `prefix/`; return (key, size) of the data objects."""
    keys = []
    for path in sorted(folder.iterdir()):
        if path.name in ("done", "index.json") or path.name.endswith(".lock"):
            continue
        target.put(path, f"{prefix}/{path.name}")
        keys.append((f"{prefix}/{path.name}", path.stat().st_size))
    target.put(folder / "index.json", f"{prefix}/index.json")  # last
    return keys


def ceiling(target: Target, keys: list[tuple[str, int]], threads: int = 8) -> float:
    """MB/s of fetching every object as parallel 8 MiB range GETs with the store's own client
    (bytes to memory only)."""
    ranges = [(k, lo, min(lo + PART, size) - 1) for k, size in keys for lo in range(0, size, PART)]
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(lambda item: target.get_range(*item), ranges))
    return total / MB / (time.perf_counter() - start)


def prepare_ceiling(remote: str, keys: list[tuple[str, int]], raw: dict[str, int],
                    threads: int = 4) -> float:
    """MB/s (compressed) of fetching and decompressing every shard to disk with `threads`
    threads and no reader: the work the engine must do, the same way (zstd decoded while the
    object arrives, `stream_object` + `ZstdStream`), without the engine. `raw`: zip basename ->
    raw bytes, checked."""
    from streaming.format.compression import ZstdStream
    from streaming.storage.streamed import stream_object

    folder = Path(tempfile.mkdtemp(prefix="bench-prep-"))

    def prepare(item: tuple[str, int]) -> int:
        key, size = item
        name = key.rsplit("/", 1)[-1]
        decoder = ZstdStream()
        with open(folder / name.removesuffix(".zstd"), "wb") as out:
            stream_object(f"{remote}/{name}", lambda piece: out.write(decoder.feed(piece)),
                          size=size)
            decoder.finish()
            if out.tell() != raw[name]:
                raise RuntimeError(f"{name}: decoded {out.tell()} bytes, expected {raw[name]}")
        return size

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(prepare, keys))
    seconds = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    return total / MB / seconds


def engine_epoch(remote: str, limit: int | None, predownload: int) -> dict:
    """Read every sample once in order through one CacheEngine from a cold cache folder."""
    local = tempfile.mkdtemp(prefix="bench-cache-")
    start = time.perf_counter()
    stream = Stream(remote=remote, local=local)
    stream.apply_defaults(download_retry=2, download_timeout=60, validate_hash=None,
                          keep_zip=False)
    index = read_index(stream.index_file())
    facts = ShardFacts.from_indexes([index])
    codec = index.codec()
    engine = CacheEngine(ShardPreparer([stream], facts), cache_limit=limit,
                         predownload=predownload, prefetch_threads=4)
    locator = SampleLocator(index.samples_per_shard)
    ids = np.arange(index.num_samples)
    engine.check_plan(ids[None, None], locator.shard_starts)  # refuses an unworkable limit
    shards, rows = locator.locate(ids)
    engine.follow(shards)
    first = None
    current, reader = -1, None
    for k, (shard, row) in enumerate(zip(shards.tolist(), rows.tolist())):
        if shard != current:
            if reader is not None:
                reader.close()
                engine.release(current)
            reader = ShardReader(engine.acquire(shard), codec)
            current = shard
        reader.get(row)
        if first is None:
            first = time.perf_counter() - start
        if k % 64 == 0:
            engine.advance(k)
    reader.close()
    engine.release(current)
    seconds = time.perf_counter() - start
    stats = engine.stats()
    engine.close()
    shutil.rmtree(local, ignore_errors=True)
    return {"seconds": seconds, "first": first, "samples": int(index.num_samples),
            "zip_mb": float(np.sum(facts.zip_bytes)) / MB, "stats": stats}


def run_child(cmd: list[str], env: dict, stall: float, wall: float) -> dict:
    """Run one system's epoch in its own process group; kill the group if no progress line
    arrives for `stall` seconds or the epoch outlasts `wall` seconds. Returns the result line,
    or an `error` naming the last progress."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                cwd=tempfile.gettempdir(), start_new_session=True)
        lines: list[dict] = []
        heard = [time.monotonic()]

        def read() -> None:
            for line in proc.stdout:
                if line.startswith("{"):
                    lines.append(json.loads(line))
                    heard[0] = time.monotonic()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        began, killed = time.monotonic(), ""
        while proc.poll() is None:
            now = time.monotonic()
            if now - heard[0] > stall or now - began > wall:
                killed = (f"stalled: no progress for {stall:.0f} s" if now - heard[0] > stall
                          else f"unfinished after {wall:.0f} s")
                os.killpg(proc.pid, signal.SIGKILL)  # the child and its DataLoader workers
                proc.wait(10)
                break
            time.sleep(0.1)
        reader.join(10)
        err.seek(0)
        tail = err.read().strip().splitlines()
    done = [r for r in lines if r["kind"] == "result"]
    if done and not killed and proc.returncode == 0:
        return done[-1]
    seen = [r for r in lines if r["kind"] == "progress"]
    where = (f" at {seen[-1]['samples']:,} samples after {seen[-1]['seconds']:.0f} s "
             f"({seen[-1]['samples'] / seen[-1]['seconds']:,.0f}/s)" if seen
             else " before the first batch")
    if killed:
        return {"error": f"{killed}{where}, killed"}
    errors = [t for t in tail if "Error" in t or "error" in t] or tail or ["(no stderr)"]
    return {"error": f"failed{where}: {errors[-1].strip()[:300]}"}


def systems(kind: str, litdata_dir: Path | None, env: dict,
            remote: str) -> dict[str, tuple[list[str], str]]:
    """name -> (command prefix taking the JSON arguments last, remote URL) for each system."""
    found = {"ours": ([sys.executable, str(PEERS / "ours_remote.py")], remote)}
    ref = VENVS / "reference" / "bin" / "python"
    if ref.exists():
        found["reference"] = ([str(ref), str(PEERS / "reference_remote.py")],
                              f"s3://{BUCKET}/{kind}")
    if litdata_dir is not None:
        found["litdata"] = ([str(VENVS / "litdata" / "bin" / "python"),
                             str(PEERS / "litdata_remote.py"), "epoch"],
                            f"s3://{BUCKET}/litdata-{kind}")
    return found


def litdata_copy(corpus: Corpus, kind: str) -> Path | None:
    """LitData's zstd chunks of the same samples (cached in bench-data/), None without its venv."""
    python = VENVS / "litdata" / "bin" / "python"
    if not python.exists():
        return None
    out = BENCH_DATA / "peers" / "litdata-remote" / f"{kind}-{len(corpus)}-{SHARD_SIZE}-zstd"
    subprocess.run([str(python), str(PEERS / "litdata_remote.py"), "convert",
                    str(corpus.folder), str(out), str(SHARD_BYTES)], check=True,
                   cwd=tempfile.gettempdir())
    return out


# What each system's process imports before its first batch (keyed by the name before a comma).
IMPORTS = {"ours": "import torch, boto3, streaming.loader.dataloader",
           "reference": "import torch, boto3, streaming",
           "litdata": "import torch, litdata"}


def warm_imports(name: str, python: str, env: dict) -> None:
    """Import a system's packages in a throwaway process, so its epoch reads them from the page
    cache. On these VMs torch's ~450 MB of libraries drop out of the page cache between runs
    and a cold `import torch` takes 13 s instead of 2 s (slow virtual disk): whichever system
    ran first after that paid it as "time to first batch" and a 5-35 s slower epoch. Not
    fatal: a system that cannot import fails its epoch, which reports it."""
    subprocess.run([python, "-c", IMPORTS[name.split(",")[0]]], env=env, check=False,
                   cwd=tempfile.gettempdir(), timeout=300, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def epoch(cmd: list[str], remote: str, column: str, limit: int | None, env: dict,
          args: argparse.Namespace, extra: dict | None = None) -> dict:
    """One cold-cache epoch of one system (`extra`: more child arguments); the cache folder is
    removed afterwards."""
    local = tempfile.mkdtemp(prefix="bench-remote-")
    before, served = resource.getrusage(resource.RUSAGE_CHILDREN), _server_cpu()
    try:
        a = {"remote": remote, "local": local, "limit": limit, "column": column,
             "workers": WORKERS, "batch": BATCH, "endpoint": env.get("S3_ENDPOINT_URL"),
             "key": env.get("AWS_ACCESS_KEY_ID"), "secret": env.get("AWS_SECRET_ACCESS_KEY"),
             "shards": SHARDS.get(remote), **(extra or {})}
        result = run_child([*cmd, json.dumps(a)], env, args.stall, args.wall)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result["cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        result["server_cpu"] = _server_cpu() - served
        return result
    finally:
        shutil.rmtree(local, ignore_errors=True)


SERVER_PID: int | None = None  # the moto server, whose CPU time each epoch also reports
SHARDS: dict[str, int] = {}  # remote URL -> shard count, for ours' "all shards in" moment


def _server_cpu() -> float:
    """CPU seconds the S3 server has used so far (0 when unknown)."""
    try:
        fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench(kind: str, args: argparse.Namespace, target: Target, env: dict) -> dict:
    """Every measurement of one corpus; returns the numbers for --json."""
    corpus, folder = build(kind, _size(args))
    column = CORPORA[kind][2]
    keys = upload(target, folder, kind)
    lit = None if args.no_peers else litdata_copy(corpus, kind)
    if lit is not None:
        upload(target, lit, f"litdata-{kind}")
    zip_mb = sum(size for _, size in keys) / MB
    index = read_index(folder / "index.json")
    raw = int(np.sum(index.raw_bytes))
    limit = raw // 4
    print(f"\n{kind}: {len(corpus):,} samples, {corpus.nbytes / MB:,.0f} MB payload, "
          f"{len(keys)} zstd shards, {zip_mb:,.0f} MB in {target.name} ({raw / MB:,.0f} MB raw); "
          f"cache_limit 25% = {limit / MB:,.0f} MB")
    top = ceiling(target, keys)
    top_sps = len(corpus) * top / zip_mb
    remote = target.url(kind)
    SHARDS[remote] = int(index.num_shards)
    work = prepare_ceiling(remote, keys, dict(zip(index.zip_basenames,
                                                  index.raw_bytes.tolist())))
    print(f"  {'ceiling: 8 range GETs':<24} {top_sps:>9,.0f} samples/s {top:>7.1f} MB/s of "
          f"zstd objects")
    print(f"  {'ceiling: fetch+zstd -d':<24} {len(corpus) * work / zip_mb:>9,.0f} samples/s "
          f"{work:>7.1f} MB/s (4 threads, no reader)")
    report: dict = {"samples": len(corpus), "zip_mb": zip_mb, "raw_mb": raw / MB,
                    "limit": limit, "get_mb_s": top, "prepare_mb_s": work, "runs": {}}
    for name, lim in (("engine alone", None), ("engine alone, 25%", limit)):
        run = engine_epoch(remote, lim, args.predownload)
        rate = run["samples"] / run["seconds"]
        print(f"  {name:<24} {rate:>9,.0f} samples/s  first sample {run['first']:5.2f} s  "
              f"x{rate / top_sps:.2f} of GET ceiling  (in order, one thread, no loader)")
    found = {name: (cmd, url, None)
             for name, (cmd, url) in systems(kind, lit, env, remote).items()
             if not (args.no_peers and name != "ours")}
    # Our default py1e block spans this whole corpus, so batch 1 waits for every shard; a block
    # of BLOCK_SHARDS shards' samples lets downloads overlap reading (an option, not the default).
    block = BLOCK_SHARDS * index.num_samples // index.num_shards
    if target.name == "s3":
        found[f"ours, block {block:,}"] = (found["ours"][0], found["ours"][1], {"block": block})
    # Unlimited epochs: `rounds` interleaved rounds (this machine drifts by tens of percent
    # between minutes), each system once per round; the median run stands for the system.
    laps: dict[str, list[dict]] = {name: [] for name in found}
    for k in range(args.rounds):
        for name, (cmd, url, extra) in found.items():
            warm_imports(name, cmd[0], env)
            r = epoch(cmd, url, column, None, env, args, extra)
            laps[name].append(r)
            label = name if args.rounds == 1 else f"{name} #{k + 1}"
            print(line(label, r), flush=True)
    runs = report["runs"]
    for name, results in laps.items():
        runs[name] = median(results)
        report.setdefault("rounds", {})[name] = results
        if args.rounds > 1:
            print(line(f"{name} (median)", runs[name]), flush=True)
    for name, (cmd, url, extra) in found.items():
        if extra:
            continue
        sys_limit = limit if name != "litdata" else sum(p.stat().st_size
                                                        for p in lit.iterdir()) // 4
        warm_imports(name, cmd[0], env)
        r = epoch(cmd, url, column, sys_limit, env, args)
        runs[name + ", 25%"] = r
        print(line(name + ", 25%", r), flush=True)
    print("  ratios (samples/s; medians, then round by round):")
    for peer in ("reference", "litdata"):
        ratio(f"ours / {peer}", runs.get("ours"), runs.get(peer),
               list(zip(laps.get("ours", []), laps.get(peer, []))))
        ratio_after_startup(f"ours / {peer}, after start-up", laps.get("ours", []),
                             laps.get(peer, []))
        ratio(f"ours 25% / {peer} 25%", runs.get("ours, 25%"), runs.get(f"{peer}, 25%"))
    ours, quarter = runs.get("ours"), runs.get("ours, 25%")
    if ours and "error" not in ours:
        print(f"    ours / {target.name} GET ceiling: x{sps(ours) / top_sps:.2f} "
              f"(whole epoch), x{data_sps(ours) / top_sps:.2f} (after start-up)")
        report["fraction_of_ceiling"] = sps(ours) / top_sps
    download_phase(laps.get("ours", []), zip_mb, top)
    ratio("ours 25% / ours no limit", quarter, ours)
    return report


def _size(args: argparse.Namespace) -> str:
    return "quick" if args.quick else "full" if args.full else "default"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small corpora (~80 MB each)")
    size.add_argument("--full", action="store_true",
                      help="large corpora (~1 GB each), where start-up weighs less")
    parser.add_argument("--corpus", choices=["tokens", "blobs", "both"], default="both")
    parser.add_argument("--backend", choices=sorted(TARGETS), default="s3",
                        help="the store serving the corpora (peers run on s3 only)")
    parser.add_argument("--no-peers", action="store_true", help="only this project")
    parser.add_argument("--stall", type=float, default=180.0,
                        help="seconds without progress before a system is killed as stalled")
    parser.add_argument("--wall", type=float, default=180.0,
                        help="seconds one epoch may take before it is killed as unfinished")
    parser.add_argument("--predownload", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved unlimited epochs per system (the median is reported)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    kinds = ["tokens", "blobs"] if args.corpus == "both" else [args.corpus]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"{WORKERS} workers, batch {BATCH}, shuffle, cold cache")
    if args.backend != "s3":
        args.no_peers = True  # the peers' scripts speak S3 only
    target = TARGETS[args.backend]()
    try:
        # AWS_ALLOW_HTTP: LitData fetches chunks with obstore, which refuses http:// without it
        env = {**os.environ, **target.env, "OMP_NUM_THREADS": "1", "AWS_ALLOW_HTTP": "true"}
        env.pop("PYTHONPATH", None)
        os.environ.update(target.env)
        global SERVER_PID
        SERVER_PID = target.pid
        print(f"{target.name} server serving {target.url('')}")
        report = {kind: bench(kind, args, target, env) for kind in kinds}
        summary = ", ".join(f"{kind} x{r['fraction_of_ceiling']:.2f}"
                            for kind, r in report.items() if "fraction_of_ceiling" in r)
        print(f"\nours / {target.name} ranged-GET ceiling: {summary}")
    finally:
        target.stop()
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
