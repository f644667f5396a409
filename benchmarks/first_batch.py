"""Time to first batch: from constructing the dataset to the first batch in the training process,
for us, mosaicml-streaming (the reference) and LitData on the same samples in the same run.

    .venv/bin/python benchmarks/first_batch.py [--samples 20000] [--rounds 3] [--json F]
                                               [--only 'S3 zstd']
    .venv/bin/python benchmarks/first_batch.py --pool F [F ...]   # rounds of saved runs pooled

Rows: the dataset read in place from local disk; zstd shards from a local folder into a fresh and
into a warm cache; zstd shards from S3 (a loopback moto server) into a fresh and into a warm cache;
each with 0 and 2 DataLoader workers, batch 64, shuffled. A warm cache is the one a previous
process filled (the same first shards, as the seed is the same). Each system runs in its own
process and venv (benchmarks/peers/setup.sh; PEERS_DIR names where they are), imports done before
the clock starts, our package compiled to bytecode first as an installed one is; the median of
--rounds runs is shown (the systems take turns in each round, in an order that rotates from round
to round), each round in fresh cache folders. `ours / best peer` is the median over the rounds of
our time over the faster peer's in the same round, with a 95% bootstrap interval of that median:
the run's resolution, on a machine whose speed drifts between rounds. LitData reads its own copy of
the samples (litdata.optimize, chunks of the MDS shard size, zstd for the remote rows); it reads a
local folder in place, so it has no fresh-cache local row. A fresh-cache row also prints a floor:
the time to bring the compressed shards the first batch reads and decompress them in memory, one
thread each, with no library at all (`floor` below); no reader can start sooner. Prints only;
nothing is asserted (timings vary on shared machines).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO)]

from _stats import median_interval  # noqa: E402

VENVS = Path(os.environ.get("PEERS_DIR", REPO / ".bench-venvs"))
TIMEOUT = 300  # seconds per run

CHILD = r"""
import json, sys, time
import torch
a = json.loads(sys.argv[1])
lib, workers = a["lib"], a["workers"]
def plain(batch):
    return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in s.items()}
            for s in batch]
if lib == "litdata":
    import litdata
    from litdata.streaming import downloader
    options = {}
    if a.get("endpoint"):
        downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True
        options = {"storage_options": {"endpoint_url": a["endpoint"], "aws_access_key_id":
                   a["key"], "aws_secret_access_key": a["secret"], "region_name": "us-east-1"}}
    t0 = time.perf_counter()
    ds = litdata.StreamingDataset(a["remote"] or a["local"], shuffle=True,
                                  **({"cache_dir": a["local"]} if a["remote"] else {}), **options)
    loader = litdata.StreamingDataLoader(ds, batch_size=64, num_workers=workers,
                                         collate_fn=plain)
else:
    if lib == "reference":
        from reference_import import reference_streaming_dataset
        StreamingDataset = reference_streaming_dataset()
    else:
        from streaming import StreamingDataset
    t0 = time.perf_counter()
    ds = StreamingDataset(remote=a["remote"], local=a["local"], batch_size=64, shuffle=True)
    if lib == "ours":
        from streaming import StreamingDataLoader
        loader = StreamingDataLoader(ds, batch_size=64, num_workers=workers)
    else:
        loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=workers,
                                             collate_fn=plain)
it = iter(loader)
next(it)
first = time.perf_counter() - t0
del it
print(json.dumps({"first": first}))
"""


FLOOR = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import zstandard
a = json.loads(sys.argv[1])
names = [s["zip_data"]["basename"] for s in a["shards"]]
if a.get("endpoint"):
    import boto3
    client = boto3.client("s3", endpoint_url=a["endpoint"], aws_access_key_id=a["key"],
                          aws_secret_access_key=a["secret"], region_name="us-east-1")
    bucket, _, prefix = a["remote"][len("s3://"):].partition("/")
    def source(name):
        return client.get_object(Bucket=bucket, Key=f"{prefix}/{name}")["Body"]
else:
    folder = a["remote"][len("file://"):]
    def source(name):
        return open(f"{folder}/{name}", "rb")
def bring(name):
    with source(name) as body:
        reader = zstandard.ZstdDecompressor().stream_reader(body, read_size=1 << 20)
        while reader.read(1 << 22):
            pass
t0 = time.perf_counter()
with ThreadPoolExecutor(len(names)) as pool:
    list(pool.map(bring, names))
print(json.dumps({"first": time.perf_counter() - t0}))
"""


def floor(remote: str, folder: Path, env: dict, s3: dict) -> float | None:
    """Seconds to bring every shard the first batch reads (a shuffled first batch of 64
    samples reads both shards of this corpus) and decompress them in memory, all at once on
    one thread each: no library, no writes, nothing verified. What any reader must spend
    before a fresh-cache first batch on this machine, in this run."""
    shards = json.loads((folder / "index.json").read_text())["shards"]
    args = {"remote": remote, "shards": shards, **(s3 if remote.startswith("s3://") else {})}
    environ = {k: v for k, v in {**os.environ, **env}.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", FLOOR, json.dumps(args)], capture_output=True,
                         text=True, env=environ, cwd="/tmp", timeout=TIMEOUT)
    if out.returncode:
        print(f"  floor {remote}: failed: {out.stderr[-600:]}", file=sys.stderr)
        return None
    return float(json.loads(out.stdout.strip().splitlines()[-1])["first"])


def child(lib: str, args: dict, env: dict) -> float | None:
    """Seconds to the first batch of one run, None when it failed."""
    python = Path(sys.executable) if lib == "ours" else VENVS / lib / "bin" / "python"
    environ = {k: v for k, v in {**os.environ, **env}.items() if k != "PYTHONPATH"}
    environ["OMP_NUM_THREADS"] = "1"
    if lib == "ours":
        environ["PYTHONPATH"] = str(REPO)
    elif lib == "reference":
        environ["PYTHONPATH"] = str(REPO / "benchmarks" / "peers")
    try:
        out = subprocess.run([str(python), "-c", CHILD, json.dumps({"lib": lib, **args})],
                             capture_output=True, text=True, env=environ, cwd="/tmp",
                             timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        print(f"  {lib}: timed out", file=sys.stderr)
        return None
    if out.returncode:
        print(f"  {lib} {args}: failed: {out.stderr[-600:]}", file=sys.stderr)
        return None
    return float(json.loads(out.stdout.strip().splitlines()[-1])["first"])


def prepare(samples: int) -> dict[str, Path]:
    """The corpus as raw MDS, zstd MDS and LitData chunks (plain and zstd), built once."""
    from _corpus import BENCH_DATA, token_corpus

    from writers.mds import MDSWriter

    corpus = token_corpus(samples=samples)
    root = BENCH_DATA / "first_batch" / f"tokens-{samples}"
    paths = {"raw": root / "raw", "zstd": root / "zstd"}
    for kind, folder in paths.items():
        if not (folder / "index.json").exists():
            with MDSWriter(columns=corpus.columns, out=folder, exist_ok=True,
                           compression="zstd" if kind == "zstd" else None) as writer:
                for sample in corpus:
                    writer.write(sample)
    lit = VENVS / "litdata" / "bin" / "python"
    if lit.exists():
        source = BENCH_DATA / "corpus" / f"tokens-{samples}-1000-50257-0"
        paths["lit"], paths["lit_zstd"] = root / "litdata", root / "litdata-zstd"
        shard = json.loads((paths["raw"] / "index.json").read_text())["shards"][0]
        subprocess.run([str(lit), str(REPO / "benchmarks/peers/litdata_convert.py"),
                        str(source), str(paths["lit"])], check=True, cwd="/tmp")
        subprocess.run([str(lit), str(REPO / "benchmarks/peers/litdata_remote.py"), "convert",
                        str(source), str(paths["lit_zstd"]),
                        str(shard["raw_data"]["bytes"])], check=True, cwd="/tmp")
    return paths


def upload(target, folder: Path, prefix: str) -> str:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        target.put(path, f"{prefix}/{path.relative_to(folder)}")
    return target.url(prefix)


def sources(paths: dict[str, Path], s3_urls: dict[str, str]) -> list[tuple[str, dict]]:
    """(row name, {lib: (remote, in-place local or None, cached)}) for every row."""
    lit = "lit" in paths
    rows = [("local, read in place",
             {"ours": (None, paths["raw"]), "reference": (None, paths["raw"]),
              **({"litdata": (None, paths["lit"])} if lit else {})})]
    for where, remote in (("local zstd", {"ours": f"file://{paths['zstd']}",
                                           "reference": str(paths["zstd"])}),
                          ("S3 zstd", {"ours": s3_urls["mds"], "reference": s3_urls["mds"],
                                       **({"litdata": s3_urls["lit"]} if lit else {})})):
        for cache in ("fresh", "warm"):
            rows.append((f"{where}, {cache} cache", {k: (v, cache) for k, v in remote.items()}))
    return rows


def measure(lib: str, spec: tuple, workers: int, env: dict, s3: dict) -> float | None:
    remote, where = spec
    if remote is None:  # read in place
        return child(lib, {"remote": None, "local": str(where), "workers": workers}, env)
    cache = tempfile.mkdtemp(prefix=f"first-batch-{lib}-")
    try:
        args = {"remote": remote, "local": cache, "workers": workers,
                **(s3 if remote.startswith("s3://") else {})}
        if where == "warm" and child(lib, args, env) is None:
            return None
        return child(lib, args, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=20_000, help="token samples (~4 KB each)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="write the medians here")
    p.add_argument("--only", help="run only the rows whose name contains this")
    p.add_argument("--pool", nargs="+", metavar="JSON",
                   help="run nothing: pool the rounds of runs saved with --json")
    args = p.parse_args()
    if args.pool:
        pool([json.loads(Path(f).read_text()) for f in args.pool])
        return
    from _targets import S3Target

    paths = prepare(args.samples)
    # Installed packages (the peers') come with compiled bytecode; a checkout run where
    # PYTHONDONTWRITEBYTECODE is set would compile our lazily imported modules in every run.
    compileall.compile_dir(str(REPO / "streaming"), quiet=1)
    target = S3Target()
    try:
        urls = {"mds": upload(target, paths["zstd"], "mds")}
        if "lit_zstd" in paths:
            urls["lit"] = upload(target, paths["lit_zstd"], "lit")
        s3 = {"endpoint": target.env["S3_ENDPOINT_URL"], "key": target.env["AWS_ACCESS_KEY_ID"],
              "secret": target.env["AWS_SECRET_ACCESS_KEY"]}
        rows = [row for row in sources(paths, urls) if args.only is None or args.only in row[0]]
        print(f"load average {os.getloadavg()[0]:.1f}")
        report = run_rows(rows, args.rounds, target.env, s3, paths["zstd"])
    finally:
        target.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


def run_rows(rows: list[tuple[str, dict]], rounds: int, env: dict, s3: dict,
             zstd: Path) -> dict:
    libs = ("ours", "reference", "litdata")
    print(f"median of {rounds} runs, seconds from constructing the dataset to the first batch; "
          "ours / best peer: the median over the rounds of ours over the faster peer in the "
          "same round [95% bootstrap interval]; floor: bringing and decompressing the shards "
          "the first batch reads, no library")
    print(f"{'':32} {'workers':>7} " + " ".join(f"{lib:>10}" for lib in libs)
          + f" {'ours / best peer':>22} {'floor':>8} {'ours / floor':>13}")
    report = {}
    for name, specs in rows:
        for workers in (0, 2):
            runs = _row_runs(specs, rounds, workers, env, s3, zstd, "fresh" in name)
            medians = {lib: statistics.median(done) if (done := [t for t in took if t])
                       else None for lib, took in runs.items()}
            paired = _paired_ratios(runs, libs[1:])
            ratio = median_interval(paired) if paired else None
            low = medians.get("floor")
            cells = " ".join(f"{medians[lib]:>10.3f}" if medians.get(lib) is not None
                             else f"{'-':>10}" for lib in libs)
            print(f"{name:32} {workers:>7} {cells} "
                  + (f"{ratio[0]:>8.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]"
                     if ratio is not None else f"{'-':>22}")
                  + (f" {low:>8.3f} {medians['ours'] / low:>13.2f}" if low and medians["ours"]
                     else f" {'-':>8} {'-':>13}"), flush=True)
            report[f"{name} | {workers} workers"] = {
                **medians, "ratio": ratio[0] if ratio else None,
                "ratio_interval": list(ratio[1:]) if ratio else None, "runs": runs}
    return report


def pool(reports: list[dict]) -> None:
    """Print each row's `ours / best peer` over the rounds of every saved run that has it, with
    the 95% bootstrap interval of the median (and, for a fresh-cache row, the rounds above its
    goal of x0.33)."""
    print("ours / best peer over the pooled rounds of each row [95% bootstrap interval]")
    rows: dict[str, list[float]] = {}
    for report in reports:
        for name, row in report.items():
            rows.setdefault(name, []).extend(_paired_ratios(row["runs"], ("reference", "litdata")))
    for name, ratios in rows.items():
        if ratios:
            mid, low, high = median_interval(ratios)
            above = (f"  above x0.33: {sum(r > 1 / 3 for r in ratios)}" if "fresh" in name
                     else "")  # the goal of a fresh-cache row; the others' is x1
            print(f"{name:40} rounds {len(ratios):>3}  x{mid:.2f} [{low:.2f}, {high:.2f}]{above}")


def _paired_ratios(runs: dict[str, list[float | None]], peers: tuple[str, ...]) -> list[float]:
    """Per round, ours over the fastest peer of that round (rounds where ours or every peer
    failed are left out)."""
    ratios = []
    for k, ours in enumerate(runs["ours"]):
        theirs = [runs[p][k] for p in peers if p in runs and runs[p][k]]
        if ours and theirs:
            ratios.append(ours / min(theirs))
    return ratios


def _row_runs(specs: dict, rounds: int, workers: int, env: dict, s3: dict, zstd: Path,
              fresh: bool) -> dict[str, list[float | None]]:
    """Seconds of each system (and of the floor, for a fresh-cache row) in each of `rounds`
    rounds in which they take turns, so a slow phase of the machine hits all (None: failed).
    The turn order rotates from round to round, so that no system always runs first or right
    after the same one (whose cache folder was just deleted, whose pages were just read)."""
    present = {lib: spec for lib, spec in specs.items()
               if lib == "ours" or (VENVS / lib / "bin" / "python").exists()}
    turns = [*present, "floor"]
    runs: dict[str, list[float | None]] = {lib: [] for lib in turns}
    for k in range(rounds):
        for lib in turns[k % len(turns):] + turns[:k % len(turns)]:
            if lib != "floor":
                runs[lib].append(measure(lib, present[lib], workers, env, s3))
            else:
                runs[lib].append(floor(specs["ours"][0], zstd, env, s3) if fresh else None)
    return runs


if __name__ == "__main__":
    main()
