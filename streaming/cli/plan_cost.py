"""`streaming plan CONFIG --cache-limit 40gb --epochs 3`: what the run will download, evict and
hold in each node's cache (`streaming.observe.forecast`), as lines, as JSON, and as a picture of
cache occupancy over the steps."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streaming.cli._common import UserError, human_bytes
from streaming.errors import PlanError

if TYPE_CHECKING:
    from streaming.cli.plan_setup import Setup
    from streaming.observe.forecast import Forecast, JobMinimum, Restart, RunSpec
    from streaming.packing.lengths_traffic import LengthsTraffic
    from streaming.plan import PlanConfig, World

GIB = 1 << 30  # egress prices are per GB as cloud bills count it (2^30 bytes)
PICTURED_NODES = 16  # nodes drawn in the occupancy picture at most


def add_cost_arguments(p: argparse.ArgumentParser) -> None:
    """The cost-prediction options of `streaming plan`.

    Args:
        p: the `plan` subcommand's parser.
    """
    p.add_argument("--cache-limit", help="per-node cache_limit to simulate, e.g. 40gb "
                   "(default: the config's cache_limit, else no limit)")
    p.add_argument("--epochs", type=int, default=None, help="epochs to simulate (default 1)")
    p.add_argument("--predownload", type=int, default=None,
                   help="samples each reader prepares ahead (default: the config's, else "
                        "8 batches)")
    p.add_argument("--egress-price", type=float, default=None,
                   help="price per GB downloaded, for a cost line (e.g. 0.09)")
    p.add_argument("--restart-step", type=int, default=None,
                   help="also predict a restart on fresh local disks at this global batch")
    p.add_argument("--cache-png", help="where to draw cache occupancy (default: CONFIG stem + "
                                       ".cache.png; with --json only when given)")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON only")
    p.add_argument("--nodes", type=node_list, default=None,
                   help="simulate only these nodes, e.g. 97 or 0,64-67 (their figures are exact; "
                        "the job's egress is estimated from their mean)")
    p.add_argument("--jobs", type=int, default=None,
                   help="processes that simulate the nodes (default: one per core, at most one "
                        "per node, for runs of 5M samples or more; else 1)")


def node_list(text: str) -> list[int]:
    """`--nodes`: node numbers and ranges, e.g. `97` or `0,64-67`.

    Args:
        text: the option's value.
    """
    nodes: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            nodes += range(int(first), int(last or first) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of nodes such as 97 or 0,64-67") from None
    return nodes


def wants_cost(args: argparse.Namespace, setup: Setup) -> bool:
    """Whether to predict costs: asked for by an option, a remote or a limit in the config."""
    return bool(args.cache_limit or args.epochs or args.egress_price is not None
                or args.nodes is not None
                or args.restart_step is not None or args.cache_png or any(setup.remotes)
                or "cache_limit" in setup.run)


def run_spec(args: argparse.Namespace, setup: Setup) -> tuple[RunSpec, list[LengthsTraffic]]:
    """The run to predict from the config and the options, with each stream's sample-lengths
    traffic (none unless the config packs or mixes by tokens)."""
    from streaming.cache.policy.cache_limit import CacheLimit
    from streaming.cache.policy.minimum_limit import Footprint
    from streaming.format.parquet_decoded import decoded_room
    from streaming.observe.forecast import RunSpec
    from streaming.read.row_reader import samples_ahead

    limit = args.cache_limit or setup.run.get("cache_limit")
    predownload = args.predownload if args.predownload is not None else setup.run.get(
        "predownload")
    epochs = 1 if args.epochs is None else int(args.epochs)
    if epochs < 1:
        raise UserError(f"--epochs must be at least 1, got {epochs}")
    try:
        limit = CacheLimit.parse(limit)
        ahead = samples_ahead(predownload, setup.cfg.batch_size)
    except PlanError as exc:
        raise UserError(str(exc)) from None
    footprint, fetch = _footprint(setup)
    traffic = lengths_traffic(setup, fetch)
    decoded = np.concatenate([ix.decoded_bytes for ix in setup.indexes])
    spec = RunSpec(setup.cfg, setup.world, footprint, fetch, limit, ahead, epochs,
                   other_bytes=_other_bytes(setup) + sum(t.kept_bytes for t in traffic),
                   lengths_bytes=sum(t.fetched_bytes for t in traffic),
                   fit_other_bytes=_other_bytes(setup),
                   decoded=Footprint(decoded, np.zeros_like(decoded)),
                   decoded_room=decoded_room())
    return spec, traffic


def lengths_traffic(setup: Setup, fetch: np.ndarray) -> list[LengthsTraffic]:
    """Each stream's one-off sample-lengths traffic on a node, for every column the run reads
    the lengths of before its first batch: `packing_column` ("tokens" by default) with
    `packing: true`, `lengths_column` ("tokens") with `mix_unit: tokens` (one column read once
    when they agree); none otherwise.

    Args:
        setup: the config.
        fetch: bytes a download of each shard moves (all streams, in order).
    """
    from streaming.packing.lengths_traffic import lengths_traffic as stream_traffic

    assumed = not any(setup.remotes)
    bounds = np.cumsum([0] + [ix.num_shards for ix in setup.indexes])
    return [stream_traffic(ix, column, fetch[bounds[i]:bounds[i + 1]], bool(remote or assumed))
            for column in lengths_columns(setup)
            for i, (ix, remote) in enumerate(zip(setup.indexes, setup.remotes))]


def lengths_columns(setup: Setup) -> list[str]:
    """The columns whose sample lengths the run reads before its first batch.

    Args:
        setup: the config.
    """
    packing = setup.run.get("packing", False)
    if not isinstance(packing, bool):
        raise UserError(f"packing must be true or false, got {packing!r}")
    columns = []
    for key, wanted in (("packing_column", packing),
                        ("lengths_column", setup.run.get("mix_unit") == "tokens")):
        column = setup.run.get(key, "tokens")
        if not isinstance(column, str) or not column:
            raise UserError(f"{key} must name a column, got {column!r}")
        if wanted and column not in columns:
            columns.append(column)
    return columns


def _other_bytes(setup: Setup) -> int:
    """What a node's cache folders hold beside the shards: the index.json of every stream that
    is downloaded, and the bookkeeping files of each folder (see `_footprint` for which
    streams are downloaded; a stream read in place is not)."""
    from streaming.cache.folder.file_names import BOOKKEEPING_BYTES

    assumed = not any(setup.remotes)
    cached = [n for n, remote, index in zip(setup.index_bytes, setup.remotes, setup.indexes)
              if (remote or assumed) and not index.read_in_place]
    return sum(cached) + BOOKKEEPING_BYTES * len(cached)


def _footprint(setup: Setup) -> tuple[Any, np.ndarray]:
    """Cache bytes per shard and bytes per download. Streams naming a remote are downloaded,
    but for shards read in place; when none does, every stream is (as if its `local` were the
    remote)."""
    from streaming.cache.engine.cache_engine import shard_footprint
    from streaming.cache.shard_facts import ShardFacts
    from streaming.stream import Stream

    facts = ShardFacts.from_indexes(setup.indexes)
    assumed = not any(setup.remotes)
    streams = [Stream(remote=remote or "s3://assumed/remote", local=tempfile.gettempdir())
               if remote or assumed else Stream(local=tempfile.gettempdir())
               for remote in setup.remotes]
    return shard_footprint(facts, streams), facts.fetch_bytes


def cost_report(forecast: Forecast, restart: Restart | None, price: float | None,
                lengths: dict[str, Any] | None = None) -> dict[str, Any]:
    """The prediction as plain JSON data (`lengths`: what `lengths_report` says of the sample
    lengths a packed or token-mixed run reads)."""
    spec = forecast.spec
    fetchers = [forecast.fetchers(e) for e in range(spec.epochs)]
    nodes = []
    for n, epochs in zip(forecast.node_ids, forecast.nodes):
        nodes.append({"node": n, "bytes_downloaded": sum(c.bytes_downloaded for c in epochs),
                      "lengths_bytes": spec.lengths_bytes,
                      "epochs": [{"epoch": e, "downloads": c.downloads,
                                  "bytes_downloaded": c.bytes_downloaded,
                                  "evictions": c.evictions,
                                  "peak_cache_bytes": c.peak_cache_bytes,
                                  "duplicated_shards": int((fetchers[e][c.fetched] > 1).sum())}
                                 for e, c in enumerate(epochs)]})
    report: dict[str, Any] = {
        "epochs": spec.epochs, "cache_limit": spec.limit_bytes, "other_bytes": spec.other_bytes,
        "predownload": spec.predownload,
        "topology": {"nodes": spec.world.num_nodes, "ranks_per_node": spec.world.ranks_per_node,
                     "workers_per_rank": spec.world.workers_per_rank},
        "shuffle_block_size": forecast.config.shuffle_block_size,
        "shuffle_block_samples": block_samples(forecast.config, spec.world),
        "shuffle_block_shards": block_shards(forecast.config, spec.world),
        "num_canonical_nodes": forecast.config.num_canonical_nodes,
        "batches_per_epoch": forecast.batches_per_epoch,
        "nodes": nodes, "egress_bytes": forecast.egress_bytes,
        "egress_bytes_per_epoch": forecast.egress_per_epoch(),
        "duplicated_shards_per_epoch": [int((f > 1).sum()) for f in fetchers],
        "egress_is_prediction": forecast.egress_unmodelled is None,
    }
    if forecast.egress_unmodelled is not None:
        report["egress_note"] = forecast.egress_unmodelled
    if lengths is not None:
        report["lengths"] = {**lengths, "bytes_per_node": spec.lengths_bytes,
                             "egress_bytes": forecast.lengths_egress}
    if forecast.sampled:
        report["simulated_nodes"] = list(forecast.node_ids)
        report["egress_estimated"] = True
    if price is not None:
        report["egress_price_per_gb"] = price
        report["egress_cost"] = round(forecast.egress_bytes / GIB * price, 4)
    if restart is not None:
        report["restart"] = {"step": restart.step, "epoch": restart.epoch,
                             "bytes_after": list(restart.bytes_after),
                             "bytes_without_restart": list(restart.bytes_without),
                             "extra_egress_bytes": restart.extra_bytes}
    return report


def _jobs(args: argparse.Namespace, spec: RunSpec) -> int:
    """Processes to plan or simulate the nodes in (`--jobs`, else by the run's size)."""
    from streaming.cli.node_pool import plan_jobs

    simulated = spec.world.num_nodes if args.nodes is None else len(set(args.nodes))
    return plan_jobs(args.jobs, simulated, int(spec.config.epoch_size) * spec.epochs
                     * simulated // spec.world.num_nodes)


def cache_minimum(args: argparse.Namespace, setup: Setup) -> JobMinimum:
    """The job's minimum cache_limit, as every node's StreamingDataset computes it at start-up;
    a UserError carrying the dataset's CacheLimitError message when the limit asked for (the
    option or the config's) is under it.

    Args:
        args: the `plan` options.
        setup: the config.
    """
    from streaming.cli.node_pool import node_map
    from streaming.errors import CacheLimitError
    from streaming.observe.forecast import job_minimum

    spec, _ = run_spec(args, setup)
    try:
        with node_map(_jobs(args, spec)) as map_nodes:
            minimum = job_minimum(spec, map_nodes, args.nodes)
        minimum.check(spec.limit_bytes)
    except (PlanError, CacheLimitError) as exc:
        raise UserError(str(exc)) from None
    return minimum


def block_samples(config: PlanConfig, world: World) -> int | None:
    """The shuffle block the plan uses (samples), or None without a block-based shuffle.

    Args:
        config: the plan config (fitted to the cache).
        world: the topology.
    """
    algo = config.shuffle_algorithm
    if algo is None or not algo.block_based:
        return None
    return int(config.block_size(config.canonical_nodes(world)))


def block_shards(config: PlanConfig, world: World) -> float | None:
    """How many shards of this epoch a shuffle block spans (the shards' mean samples in the
    epoch), or None without a block-based shuffle.

    Args:
        config: the plan config (fitted to the cache).
        world: the topology.
    """
    block = block_samples(config, world)
    if block is None:
        return None
    per_shard = config.epoch_samples_per_shard
    mean = float(per_shard[per_shard > 0].mean()) if (per_shard > 0).any() else 1.0
    return round(block / mean, 1)


def _predict(args: argparse.Namespace, setup: Setup, minimum: JobMinimum | None = None
             ) -> tuple[Forecast, dict[str, Any]]:
    from streaming.cli.node_pool import node_map
    from streaming.observe.forecast import predict, predict_restart

    minimum = minimum or cache_minimum(args, setup)
    spec, traffic = run_spec(args, setup)
    try:
        with node_map(_jobs(args, spec)) as map_nodes:
            forecast = predict(spec, map_nodes, args.nodes)
            restart = (None if args.restart_step is None
                       else predict_restart(forecast, int(args.restart_step), map_nodes))
    except PlanError as exc:
        raise UserError(str(exc)) from None
    report = cost_report(forecast, restart, args.egress_price, lengths_report(setup, traffic))
    report["min_cache_bytes"], report["no_eviction_cache_bytes"] = minimum.bytes, minimum.whole
    report["drift_batches"] = drift_report(spec, forecast.config, forecast.node_ids)
    return forecast, report


def drift_report(spec: RunSpec, config: PlanConfig, nodes: tuple[int, ...]) -> int | None:
    """The batches a reader may run ahead of the slowest reader of its job on its node under
    the limit (`policy.drift_bound`), the fewest over `nodes`' epoch-0 plans; None without a
    limit.

    Args:
        spec: the run.
        config: the plan config fitted to the limit.
        nodes: the nodes predicted.
    """
    limit = spec.limit_bytes
    if limit is None:
        return None
    from streaming.cache.policy.drift_bound import drift_batches
    from streaming.plan import plan_node

    plans = (plan_node(config, spec.world.with_position(n), 0) for n in nodes)
    return min(drift_batches(plan.ids, spec.footprint, config.shard_offsets, plan.batch_size,
                             limit, spec.other_bytes) for plan in plans)


def lengths_report(setup: Setup, traffic: list[LengthsTraffic]) -> dict[str, Any] | None:
    """The columns whose lengths the run reads and the streams whose shards are scanned for
    them (None when the config neither packs nor mixes by tokens).

    Args:
        setup: the config.
        traffic: each stream's lengths traffic (`lengths_traffic`).
    """
    if not traffic:
        return None
    names = setup.names * (len(traffic) // max(len(setup.names), 1))
    return {"columns": lengths_columns(setup),
            "scanned_streams": list(dict.fromkeys(n for n, t in zip(names, traffic) if t.scanned))}


def print_json(args: argparse.Namespace, setup: Setup, config: Path) -> int:
    """`--json`: the prediction as one JSON document on stdout (a picture only on request)."""
    forecast, report = _predict(args, setup)
    if args.cache_png:
        _draw(forecast, Path(args.cache_png))
    print(json.dumps(report, indent=2))
    return 0


def print_cost(args: argparse.Namespace, setup: Setup, config: Path,
               minimum: JobMinimum | None = None) -> None:
    """The prediction as lines after the plan's numbers, and the occupancy picture (`minimum`:
    the job's minimum cache_limit when already computed)."""
    forecast, report = _predict(args, setup, minimum)
    limit = report["cache_limit"]
    print(f"cache prediction  {report['epochs']} epoch(s), cache_limit "
          f"{'none' if limit is None else human_bytes(limit)} per node, predownload "
          f"{report['predownload']}" + ("" if any(setup.remotes)
                                         else " (every stream taken as remote)"))
    if report["shuffle_block_shards"] is not None:
        print(f"shuffle block     {report['shuffle_block_samples']} samples, about "
              f"{report['shuffle_block_shards']} shards of this epoch: how far a sample "
              "moves from its shard's place")
    if report["drift_batches"] is not None:
        print(f"drift bound       {report['drift_batches']} batches: a reader further ahead of "
              "the slowest reader of its job on its node waits for it")
    other = "another simulated node" if "simulated_nodes" in report else "another node"
    for node in report["nodes"]:
        for e in node["epochs"]:
            print(f"  node {node['node']} epoch {e['epoch']}: {e['downloads']} downloads "
                  f"({human_bytes(e['bytes_downloaded'])}), {e['evictions']} evictions, peak "
                  f"{human_bytes(e['peak_cache_bytes'])}"
                  + ("" if len(report["nodes"]) < 2 else
                     f", {e['duplicated_shards']} shards also downloaded by {other}"))
    per_epoch = ", ".join(human_bytes(b) for b in report["egress_bytes_per_epoch"])
    if "lengths" in report:
        per_epoch += f"; sample lengths {human_bytes(report['lengths']['egress_bytes'])}"
    sample = report.get("simulated_nodes")
    print(f"egress            {human_bytes(report['egress_bytes'])} in total ({per_epoch})"
          + ("" if sample is None else f", estimated from {len(sample)} of "
             f"{report['topology']['nodes']} nodes"))
    if "egress_note" in report:
        print(f"                  {report['egress_note']}")
    if "lengths" in report:
        lengths, scanned = report["lengths"], report["lengths"]["scanned_streams"]
        print(f"sample lengths    {human_bytes(lengths['bytes_per_node'])} per node before its "
              f"first batch ({', '.join(map(repr, lengths['columns']))}; "
              + (f"no side files: {', '.join(scanned)} scanned whole, `streaming lengths` "
                 "records them" if scanned else "side files") + "), in the egress")
    if "egress_cost" in report:
        print(f"egress cost       {report['egress_cost']:.2f} at {args.egress_price} per GB")
    if "restart" in report:
        r = report["restart"]
        print(f"restart at {r['step']:<6} {human_bytes(sum(r['bytes_after']))} downloaded after "
              f"it on fresh disks, {human_bytes(r['extra_egress_bytes'])} more than without")
    png = Path(args.cache_png) if args.cache_png else config.with_suffix(".cache.png")
    _draw(forecast, png)
    print(f"cache picture     {png}")


def _draw(forecast: Forecast, png: Path) -> None:
    """The occupancy picture: every node, or PICTURED_NODES of them evenly spread."""
    from streaming.cli.plan_plot import draw_occupancy

    count = len(forecast.nodes)
    shown = sorted(set(np.linspace(0, count - 1, min(count, PICTURED_NODES)).round()
                       .astype(int).tolist())) if count else []
    traces = []
    for i in shown:
        offset, parts = 0, []
        for cache in forecast.nodes[i]:
            steps = cache.occupancy[:, 0] + offset
            parts.append(np.stack([steps, cache.occupancy[:, 1]], axis=1))
            offset += cache.steps
        parts.append(np.array([[offset, parts[-1][-1, 1]]]))  # held to the run's end
        traces.append(np.concatenate(parts))
    draw_occupancy(traces, png, limit=forecast.spec.limit_bytes,
                   names=[forecast.node_ids[i] for i in shown])
