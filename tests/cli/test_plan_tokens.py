"""`streaming plan` with `mix_unit: tokens`: each stream's samples per epoch are those the
dataset's own token mix draws (local folders, and remotes on the loopback S3 server with side
files fetched into a scratch folder), a remote without side files is refused rather than
downloaded, and the lengths read are in the egress."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.cli.plan_setup import load_setup
from streaming.stream import Stream
from tests.support.datasets import upload_dir, write_tokens

PROPORTIONS = (0.25, 0.75)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """`long/` and `short/` record their lengths (samples of very different lengths);
    `bare/` does not."""
    root = tmp_path_factory.mktemp("plan-tokens")
    write_tokens(root / "long", 300, seed=1, max_len=400, size_limit=1 << 13)
    write_tokens(root / "short", 500, start=10_000, seed=2, max_len=40, size_limit=1 << 13)
    write_tokens(root / "bare", 500, start=10_000, seed=2, max_len=40, size_limit=1 << 13,
                 lengths=None)
    return root


def _config(tmp_path: Path, streams: list[str], extra: str = "epoch_size: 600\n") -> Path:
    body = "".join(f"  - {{{s}, proportion: {p}}}\n" for s, p in zip(streams, PROPORTIONS))
    config = tmp_path / "mix.yaml"
    config.write_text(f"streams:\n{body}batch_size: 4\nshuffle: true\nmix_unit: tokens\n"
                      f"topology: {{nodes: 2, ranks_per_node: 2, workers_per_rank: 1}}\n{extra}")
    return config


def _run_counts(streams: list[Stream], **kwargs) -> list[int]:
    ds = StreamingDataset(streams=streams, mix_unit="tokens", epoch_size=600, batch_size=4,
                          shuffle=True, **kwargs)
    try:
        return ds.config.samples_per_stream_epoch.tolist()
    finally:
        ds.close()


def _local(folders: Path, *names: str) -> list[Stream]:
    return [Stream(local=str(folders / n), proportion=p) for n, p in zip(names, PROPORTIONS)]


def test_local_streams_are_mixed_as_the_dataset_mixes_them(folders, tmp_path):
    setup = load_setup(_config(tmp_path, [f"local: '{folders / n}'" for n in ("long", "short")]))
    counts = setup.cfg.samples_per_stream_epoch.tolist()
    assert counts == _run_counts(_local(folders, "long", "short"))
    assert sum(counts) == 600 and counts[1] > 2 * counts[0]  # short samples: many more drawn
    config = _config(tmp_path, [f"local: '{folders / n}'" for n in ("long", "short")])
    config.write_text(config.read_text().replace("mix_unit: tokens\n", ""))
    assert load_setup(config).cfg.samples_per_stream_epoch.tolist() == [150, 450]  # by samples


def test_a_local_stream_without_side_files_is_scanned_in_place(folders, tmp_path):
    setup = load_setup(_config(tmp_path, [f"local: '{folders / n}'" for n in ("long", "bare")]))
    assert setup.cfg.samples_per_stream_epoch.tolist() == _run_counts(
        _local(folders, "long", "bare"))


def test_remote_streams_read_their_side_files_into_a_scratch_folder(
        folders, tmp_path, s3_env, cli):
    bucket = s3_env.make_bucket()
    for name in ("long", "short"):
        upload_dir(s3_env.client(), bucket, name, folders / name)
    cache = tmp_path / "never"
    streams = [f"remote: 's3://{bucket}/{n}', local: '{cache / n}'" for n in ("long", "short")]
    setup = load_setup(_config(tmp_path, streams))
    run = [Stream(remote=f"s3://{bucket}/{n}", local=str(tmp_path / "run" / n), proportion=p)
           for n, p in zip(("long", "short"), PROPORTIONS)]
    assert setup.cfg.samples_per_stream_epoch.tolist() == _run_counts(run)
    assert not cache.exists()  # the plan touches no cache folder
    got = cli("plan", _config(tmp_path, streams), "--json")
    assert got.code == 0, got.err
    sides = sum(p.stat().st_size for n in ("long", "short") for p in (folders / n).glob(
        "*.lengths"))
    assert got.json()["lengths"] == {"columns": ["tokens"], "scanned_streams": [],
                                     "bytes_per_node": sides, "egress_bytes": 2 * sides}


def test_a_remote_without_side_files_is_refused_by_name(folders, tmp_path, s3_env, cli):
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "bare", folders / "bare")
    streams = [f"local: '{folders / 'long'}'", f"remote: 's3://{bucket}/bare', name: bare"]
    ran = cli("plan", _config(tmp_path, streams), "--json")
    assert ran.code != 0
    assert "stream bare" in ran.err and "streaming lengths" in ran.err


def test_bad_token_mixes_are_refused(folders, tmp_path, cli):
    config = _config(tmp_path, [f"local: '{folders / n}'" for n in ("long", "short")])
    config.write_text(config.read_text().replace("mix_unit: tokens", "mix_unit: bytes"))
    ran = cli("plan", config, "--json")
    assert ran.code != 0 and "mix_unit must be samples or tokens" in ran.err
    config.write_text(config.read_text().replace("mix_unit: bytes", "mix_unit: tokens")
                      .replace(", proportion: 0.75", ""))
    ran = cli("plan", config, "--json")
    assert ran.code != 0 and "proportion on every stream" in ran.err
    config.write_text(config.read_text() + "lengths_column: 3\n")
    ran = cli("plan", config, "--json")
    assert ran.code != 0 and "lengths_column must name a column" in ran.err
