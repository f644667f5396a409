"""Ray Data <-> MDS on a real local Ray cluster (one per module): ray_to_mds writes one part
per write task and publishes one index last, locally and straight to S3 (loopback moto);
read_mds reads any MDS dataset back as a Ray Dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from streaming.errors import DatasetMismatchError
from tests.convert.helpers import (
    COLUMNS,
    DieOnce,
    FailAt,
    named_files,
    on_disk,
    rows,
    sample_bytes,
    single_writer,
)

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster(s3_server):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": s3_server.env()})
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        yield
    finally:
        ray.shutdown()


def dataset(start: int, n: int, blocks: int):
    return ray.data.from_items(rows(start, n), override_num_blocks=blocks)


def test_ray_to_mds_matches_a_single_writer_and_is_deterministic(cluster, tmp_path: Path):
    from writers.convert.ray_datasink import ray_to_mds

    result = ray_to_mds(dataset(0, 400, 4), tmp_path / "a", COLUMNS, compression=None,
                        size_limit=4096)
    assert result["samples"] == 400 and result["parts"] == 4
    single = single_writer(tmp_path / "one", rows(0, 400), size_limit=4096)
    assert sample_bytes(tmp_path / "a") == sample_bytes(single)
    assert on_disk(tmp_path / "a") == named_files(tmp_path / "a")
    ray_to_mds(dataset(0, 400, 4), tmp_path / "b", COLUMNS, compression=None, size_limit=4096)
    files = sorted(on_disk(tmp_path / "a"))
    assert files == sorted(on_disk(tmp_path / "b"))
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
               for f in files)


def test_a_task_killed_mid_write_is_retried_without_duplicates(cluster, tmp_path: Path):
    from writers.convert.ray_datasink import ray_to_mds

    marker = tmp_path / "died"
    out = tmp_path / "out"
    result = ray_to_mds(dataset(0, 400, 4), out, COLUMNS, compression=None, size_limit=2048,
                        transform=DieOnce(marker, at=180))
    assert marker.exists()  # a worker really died half-way through its part
    assert result["samples"] == 400
    assert sample_bytes(out) == sample_bytes(
        single_writer(tmp_path / "one", rows(0, 400), size_limit=2048))
    assert on_disk(out) == named_files(out)  # no orphan or duplicate shard


def test_append_then_a_failing_append_publishes_nothing(cluster, tmp_path: Path):
    from writers.convert.ray_datasink import ray_to_mds

    out = tmp_path / "out"
    ray_to_mds(dataset(0, 100, 2), out, COLUMNS, compression=None)
    ray_to_mds(dataset(100, 60, 2), out, COLUMNS, compression=None, mode="append")
    index = (out / "index.json").read_bytes()
    assert sample_bytes(out) == sample_bytes(single_writer(tmp_path / "one", rows(0, 160)))
    with pytest.raises(Exception, match="bad record 230"):
        ray_to_mds(dataset(200, 60, 2), out, COLUMNS, compression=None, mode="append",
                   transform=FailAt(230))
    assert (out / "index.json").read_bytes() == index
    with pytest.raises(DatasetMismatchError, match="compression"):
        ray_to_mds(dataset(0, 4, 1), out, COLUMNS, mode="append")


def test_straight_to_s3_and_read_back_with_read_mds(cluster, s3_env, tmp_path: Path):
    from streaming.integrations.ray import read_mds
    from writers.convert.ray_datasink import ray_to_mds

    url = f"s3://{s3_env.make_bucket()}/ray-out"
    result = ray_to_mds(dataset(0, 300, 3), url, compression="zstd", size_limit=4096)
    assert result["index"] == f"{url}/index.json"
    assert result["columns"] == {"id": "int", "text": "str", "tokens": "ndarray:int64"}
    read = read_mds(url)
    assert str(read.schema().base_schema.field("tokens").type) == "list<item: int64>"
    got = read.take_all()
    assert [int(r["id"]) for r in got] == list(range(300))
    assert got[9]["text"] == rows(9, 1)[0]["text"]
    assert list(got[9]["tokens"]) == rows(9, 1)[0]["tokens"]


def test_read_mds_maps_types_and_gives_bytes_otherwise(cluster, tmp_path: Path):
    from streaming.integrations.ray import read_mds
    from writers.mds import MDSWriter

    columns = {"f": "float32", "j": "json", "m": "ndarray:uint8:2,2", "s": "str"}
    with MDSWriter(out=tmp_path / "ds", columns=columns, size_limit=256) as writer:
        for i in range(20):
            writer.write({"f": np.float32(i / 2), "j": {"i": i}, "s": f"s{i}",
                          "m": np.full((2, 2), i, np.uint8)})
    table = read_mds(tmp_path / "ds").to_arrow_refs()
    merged = __import__("pyarrow").concat_tables(ray.get(table))
    assert str(merged.schema.field("f").type) == "float"
    assert merged.column("j").to_pylist()[3] == json.dumps({"i": 3}).encode()
    assert merged.column("m").to_pylist()[3] == bytes([3] * 4)
    assert merged.column("s").to_pylist() == [f"s{i}" for i in range(20)]


def test_read_mds_keeps_index_order_on_its_own_context_only(cluster, tmp_path: Path):
    """Ray hands blocks on as its tasks finish unless told otherwise: read_mds tells its own
    dataset (and those derived from it), never the process's DataContext."""
    from ray.data import DataContext

    from streaming.integrations.ray import read_mds
    from writers.mds import MDSWriter

    with MDSWriter(out=tmp_path / "ds", columns={"i": "int"}, size_limit=128) as writer:
        for i in range(200):
            writer.write({"i": i})
    ordered = read_mds(tmp_path / "ds", override_num_blocks=8)
    assert ordered.context.execution_options.preserve_order
    assert not DataContext.get_current().execution_options.preserve_order
    doubled = ordered.map_batches(lambda b: {"i": b["i"] * 2}, batch_format="numpy")
    assert [int(r["i"]) for r in doubled.take_all()] == list(range(0, 400, 2))
    free = read_mds(tmp_path / "ds", preserve_order=False)
    assert not free.context.execution_options.preserve_order
    assert sorted(int(r["i"]) for r in free.take_all()) == list(range(200))


def _train_loop(config: dict) -> None:
    """Runs in each TorchTrainer worker: a StreamingDataset built with no world arguments."""
    from streaming import StreamingDataset

    dataset = StreamingDataset(local=config["data"], shuffle=False, batch_size=4)
    try:
        world = dataset.world
        seen = [int(sample["id"]) for sample in dataset]
    finally:
        dataset.close()
    report = {"rank": world.rank, "ranks": world.world_size, "nodes": world.num_nodes,
              "local": world.rank_in_node, "ids": seen}
    Path(config["reports"], f"{world.rank}.json").write_text(json.dumps(report))


@pytest.mark.skipif(os.environ.get("MDS_TEST_RAY_TRAIN") != "1",
                    reason="a real TorchTrainer takes minutes on 2 loaded cores; set "
                           "MDS_TEST_RAY_TRAIN=1 (tests/integrations/test_ray_world.py covers "
                           "the variables it sets)")
def test_streaming_dataset_inside_torch_trainer_finds_its_world(cluster, tmp_path: Path):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    data = single_writer(tmp_path / "data", rows(0, 64), size_limit=1024)
    reports = tmp_path / "reports"
    reports.mkdir()
    trainer = TorchTrainer(
        _train_loop, train_loop_config={"data": str(data), "reports": str(reports)},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False,
                                     resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(storage_path=str(tmp_path / "ray-results")))
    trainer.fit()
    got = [json.loads((reports / f"{rank}.json").read_text()) for rank in (0, 1)]
    assert [(g["rank"], g["ranks"], g["nodes"], g["local"]) for g in got] == [
        (0, 2, 1, 0), (1, 2, 1, 1)]
    assert not set(got[0]["ids"]) & set(got[1]["ids"])
    assert sorted(got[0]["ids"] + got[1]["ids"]) == list(range(64))
