"""`streaming plan` numbers and picture; inspect/validate against a real S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_plan_prints_numbers_and_draws_a_png(cli, corpus: Path, tmp_path: Path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    for name in ("web", "code"):
        assert cli("convert", corpus, tmp_path / name, "--size-limit", "16kb", "-q").code == 0
    config = tmp_path / "mix.yaml"
    config.write_text(
        "streams:\n"
        "  - {local: web, proportion: 0.75}\n"
        "  - {local: code, proportion: 0.25}\n"
        "batch_size: 4\n"
        "batching_method: stratified\n"
        "epoch_size: 800\n"
        "shuffle: true\n"
        "topology: {nodes: 2, ranks_per_node: 2, workers_per_rank: 2}\n"
    )
    ran = cli("plan", config, "--batches", "20", "--png", tmp_path / "pic" / "mix.png")
    assert ran.code == 0, ran.err
    assert "epoch size        800 samples, 50 global batches of 16" in ran.out
    web = next(line for line in ran.out.splitlines() if line.strip().startswith("web"))
    assert "600 per epoch" in web and "600 stored" in web
    cache_line = next(line for line in ran.out.splitlines() if line.startswith("min cache"))
    need = int(cache_line.split()[3])
    biggest_shard = max(p.stat().st_size for p in (tmp_path / "web").rglob("shard.*"))
    assert biggest_shard < need  # at least one shard, and several workers read at once
    png = tmp_path / "pic" / "mix.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(png) as image:
        image.verify()
    with Image.open(png) as image:
        width, height = image.size
    assert width >= 600 and height >= 400


def test_plan_config_errors(cli, tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("streams:\n  - {local: x, weight: 2}\n")
    ran = cli("plan", bad)
    assert ran.code == 2 and "unknown keys ['weight']" in ran.err
    bad.write_text("streams: []\n")
    assert "non-empty list" in cli("plan", bad).err


def test_inspect_and_validate_s3(cli, corpus: Path, tmp_path: Path, s3_server):
    out = tmp_path / "ds"
    assert cli("convert", corpus, out, "--workers", "2", "--size-limit", "8kb", "--hashes",
               "md5", "-q").code == 0
    bucket = s3_server.make_bucket()
    client = s3_server.client()
    files = [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")]
    for path in files:
        client.upload_file(str(path), bucket, f"data/{path.relative_to(out).as_posix()}")
    url = f"s3://{bucket}/data"
    env = s3_server.env()
    info = cli("inspect", url, "--json", env=env).json()
    assert info["samples"] == 600 and len(info["parts"]) == 2
    ran = cli("validate", url, env=env)
    assert ran.code == 0 and ran.out.startswith("OK"), ran.err
    first = next(p for p in files if p.name.startswith("shard."))
    key = f"data/{first.relative_to(out).as_posix()}"
    client.put_object(Bucket=bucket, Key=key, Body=first.read_bytes()[:-1] + b"\0")
    ran = cli("validate", url, env=env)
    assert ran.code == 1 and first.name in ran.out
