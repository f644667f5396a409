"""`streaming plan --cache-limit --epochs --json`: the cache prediction against a plain recount
of what the plans read, and against what real jobs on the loopback S3 server downloaded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from streaming.format.index import read_index
from tests.support import cost_rank
from tests.support.datasets import upload_dir, write_dataset
from tests.support.jobs import ForkedJob

RANK = Path(cost_rank.__file__)
SAMPLES = 18000
CONFIG = ("streams:\n  - {{remote: '{remote}', local: cache}}\nbatch_size: 8\npredownload: 64\n"
          "shuffle: true\nshuffle_seed: 7\n"
          "topology: {{nodes: 2, ranks_per_node: 2, workers_per_rank: 2}}\n")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cost") / "big"
    write_dataset(folder, SAMPLES, size_limit=32_000)  # zstd, ~85 samples in each of ~213 shards
    return folder


def _plan(cli, config: Path, *args) -> dict:
    ran = cli("plan", config, "--json", *args)
    assert ran.code == 0, ran.err
    return ran.json()


def test_without_a_limit_each_node_downloads_the_shards_its_plan_reads_once(cli, dataset,
                                                                           tmp_path):
    from streaming.cli.plan import load_setup
    from streaming.observe.forecast import reader_sequences

    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(remote=dataset).replace("remote:", "local:", 1)
                      .replace(", local: cache", ""))
    got = _plan(cli, config, "--epochs", "2")
    setup = load_setup(config)
    index = read_index(dataset)
    fetch = np.where(index.zip_bytes > 0, index.zip_bytes, index.raw_bytes)
    assert len(got["nodes"]) == 2 and got["cache_limit"] is None
    for node in got["nodes"]:
        first, second = node["epochs"]
        read = np.unique(np.concatenate(reader_sequences(setup.cfg, setup.world, node["node"], 0)))
        assert first["downloads"] == len(read) and first["evictions"] == 0
        assert first["bytes_downloaded"] == int(fetch[read].sum())
        assert second["downloads"] == second["bytes_downloaded"] == 0  # all still cached
    assert got["egress_bytes"] == sum(n["bytes_downloaded"] for n in got["nodes"])


def test_a_limit_caps_the_peak_and_costs_egress(cli, dataset, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(remote=dataset).replace("remote:", "local:", 1)
                      .replace(", local: cache", ""))
    raw = int(read_index(dataset).raw_bytes.sum())
    free = _plan(cli, config, "--epochs", "2")
    tight = _plan(cli, config, "--epochs", "2", "--cache-limit", str(raw // 4),
                  "--egress-price", "0.09", "--restart-step", "60")
    # the nodes simulated in a pool of processes give the same figures
    assert _plan(cli, config, "--epochs", "2", "--cache-limit", str(raw // 4),
                 "--egress-price", "0.09", "--restart-step", "60", "--jobs", "2") == tight
    for node in tight["nodes"]:
        assert all(e["peak_cache_bytes"] <= raw // 4 for e in node["epochs"])
        assert node["epochs"][1]["downloads"] > 0 and node["epochs"][1]["evictions"] > 0
    assert tight["egress_bytes"] > free["egress_bytes"]
    assert tight["egress_cost"] == round(tight["egress_bytes"] / 2**30 * 0.09, 4)
    restart = tight["restart"]
    assert restart["epoch"] == 0 and restart["extra_egress_bytes"] > 0
    # the cache folder's index.json and bookkeeping files count against the limit, as in the engine
    from streaming.cache.folder.file_names import BOOKKEEPING_BYTES

    index = (dataset / "index.json").stat().st_size
    assert tight["other_bytes"] == free["other_bytes"] == index + BOOKKEEPING_BYTES


def test_plan_refuses_bad_cost_options(cli, dataset, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(remote=dataset).replace("remote:", "local:", 1)
                      .replace(", local: cache", ""))
    assert "cache_limit" in cli("plan", config, "--json", "--cache-limit", "lots").err
    assert "--epochs" in cli("plan", config, "--json", "--epochs", "0").err
    assert "restart step" in cli("plan", config, "--json", "--restart-step", "99999").err
    assert "--jobs" in cli("plan", config, "--json", "--jobs", "0").err


def _run_job(workdir: Path, remote: str, limit: int, drift: float = 0.0,
             sync_every: int = 8) -> list[dict]:
    """2 simulated nodes x 2 ranks x 2 workers read 2 epochs; each node's cache_stats()."""
    job = ForkedJob(workdir, [], script=RANK, tag="cost",
                    extra=["--remote", remote, "--local-root", str(workdir / "local"),
                           "--out-dir", str(workdir), "--cache-limit", str(limit),
                           "--drift", str(drift), "--sync-every", str(sync_every)])
    for rank in job.wait(timeout=150):
        assert rank.returncode == 0, f"rank {rank.rank}:\n{rank.stderr[-3000:]}"
    return [json.loads((workdir / f"node{n}.json").read_text()) for n in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("share", [0.25, 1.0])
def test_predicted_bytes_per_node_match_a_real_s3_run(cli, s3_env, dataset, tmp_path, share):
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "big", dataset)
    remote = f"s3://{bucket}/big"
    limit = int(int(read_index(dataset).raw_bytes.sum()) * share)
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(remote=remote))
    predicted = _plan(cli, config, "--epochs", "2", "--cache-limit", str(limit))
    measured = _run_job(tmp_path, remote, limit)
    for node, stats in zip(predicted["nodes"], measured):
        want = stats["bytes_downloaded"]
        assert abs(node["bytes_downloaded"] - want) <= 0.05 * want, (predicted, measured)


@pytest.mark.slow
def test_ranks_that_drift_apart_do_not_evict_each_others_next_shards(cli, s3_env, dataset,
                                                                     tmp_path):
    """The ranks never meet before the end of the job and one rank of each node lags (sleeps
    after each batch): left alone, the other rank would end each epoch hundreds of batches
    ahead. The cache keeps each reader within the drift the limit allows of the slowest reader
    of its job, so the node downloads what the plan predicts for lock-step readers, within
    5%."""
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "big", dataset)
    remote = f"s3://{bucket}/big"
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(remote=remote))
    limit = int(int(read_index(dataset).raw_bytes.sum()) * 0.25)
    predicted = _plan(cli, config, "--epochs", "2", "--cache-limit", str(limit))
    assert limit >= 2 * predicted["min_cache_bytes"]
    measured = _run_job(tmp_path, remote, limit, drift=0.004, sync_every=0)
    ratios = [stats["bytes_downloaded"] / node["bytes_downloaded"]
              for node, stats in zip(predicted["nodes"], measured)]
    print("measured / predicted bytes per node:", ratios)
    assert all(abs(r - 1) <= 0.05 for r in ratios), ratios
    # the bound the readers kept is the one `streaming plan` states
    assert [stats["drift_steps"] for stats in measured] == [8 * predicted["drift_batches"]] * 2


def test_plan_draws_cache_occupancy(cli, dataset, tmp_path):
    pytest.importorskip("matplotlib")
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(remote=dataset).replace("remote:", "local:", 1)
                      .replace(", local: cache", ""))
    ran = cli("plan", config, "--cache-limit", "300kb", "--epochs", "2",
              "--png", tmp_path / "batches.png")
    assert ran.code == 0, ran.err
    assert "node 1 epoch 1:" in ran.out and "egress" in ran.out
    assert re.search(r"drift bound +\d+ batches", ran.out), ran.out
    assert (tmp_path / "run.cache.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_nodes_run_in_a_pool_only_when_the_run_is_large():
    from streaming.cli.node_pool import POOL_FROM_SAMPLES, plan_jobs, usable_cores

    assert plan_jobs(None, nodes=128, samples=POOL_FROM_SAMPLES - 1) == 1
    assert plan_jobs(None, nodes=128, samples=POOL_FROM_SAMPLES) == min(usable_cores(), 128)
    assert plan_jobs(None, nodes=1, samples=10**9) == 1
    assert plan_jobs(8, nodes=2, samples=10) == 2  # never more processes than nodes


def test_some_nodes_alone_give_their_own_figures_and_an_estimate_for_the_job(cli, dataset,
                                                                            tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(remote=dataset).replace("remote:", "local:", 1)
                      .replace(", local: cache", ""))
    options = ["--epochs", "2", "--cache-limit", str(int(read_index(dataset).raw_bytes.sum()) // 4),
               "--restart-step", "60"]
    whole = _plan(cli, config, *options)
    alone = _plan(cli, config, *options, "--nodes", "1")
    assert [n["node"] for n in alone["nodes"]] == alone["simulated_nodes"] == [1]
    assert alone["egress_estimated"] and "simulated_nodes" not in whole

    def figures(node: dict) -> list[tuple]:  # shards shared with other nodes need them all
        return [(e["downloads"], e["bytes_downloaded"], e["evictions"], e["peak_cache_bytes"])
                for e in node["epochs"]]

    assert figures(alone["nodes"][0]) == figures(whole["nodes"][1])
    assert alone["egress_bytes"] == 2 * whole["nodes"][1]["bytes_downloaded"]
    assert alone["restart"]["bytes_after"] == whole["restart"]["bytes_after"][1:]
    ran = cli("plan", config, "--json", "--nodes", "1,5-6")
    assert ran.code != 0 and "5, 6 not in this job" in ran.err and "0 to 1" in ran.err
    assert "list of nodes" in cli("plan", config, "--json", "--nodes", "x").err


def test_the_egress_of_a_shuffle_that_cannot_be_fitted_is_not_called_a_prediction(cli, dataset,
                                                                                  tmp_path):
    config = tmp_path / "run.yaml"
    base = (CONFIG.format(remote=dataset).replace("remote:", "local:", 1)
            .replace(", local: cache", ""))
    limit = str(int(read_index(dataset).raw_bytes.sum() * 0.8))
    config.write_text(base + "shuffle_algo: naive\n")
    naive = _plan(cli, config, "--cache-limit", limit)
    assert naive["egress_is_prediction"] is False
    assert "not a prediction" in naive["egress_note"] and "'naive'" in naive["egress_note"]
    assert any(e["evictions"] for n in naive["nodes"] for e in n["epochs"])
    text = cli("plan", config, "--cache-limit", limit)
    assert text.code == 0 and "not a prediction: shuffle_algo='naive'" in text.out
    # nothing evicted: each shard read is downloaded once, whatever the order of the reads
    assert _plan(cli, config, "--epochs", "1")["egress_is_prediction"] is True
    config.write_text(base + "shuffle_algo: py1e\n")  # fitted to the limit: predicted
    fitted = _plan(cli, config, "--cache-limit", limit)
    assert fitted["egress_is_prediction"] is True and "egress_note" not in fitted
