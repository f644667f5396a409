"""A remote's index.json is fetched once per node and job run, not once per rank: several real
rank processes of one node (launcher variables only) build their catalogs over one S3 remote,
or over several whose indexes each rank fetches at once (moto on loopback), and the server's
request log counts the GETs of index.json."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.datasets import upload_dir, write_dataset
from tests.support.node_ranks import run_node_ranks

RANKS = 3
ROOT = Path(__file__).resolve().parents[3]
CHILD = """
import sys
from streaming.dataset.catalog import Catalog
from streaming.stream import Stream
pairs = sys.argv[1:]  # remote, local, remote, local, ...
catalog = Catalog.open([Stream(remote=r, local=l) for r, l in zip(pairs[::2], pairs[1::2])])
print(catalog.num_samples)
"""


def _node(remote: str | list[str], local: Path | list[Path], env: dict[str, str]) -> list[str]:
    """Run RANKS rank processes of one node of one job at once over the streams (remote,
    local); their printed sample counts."""
    remotes, locals_ = ([remote], [local]) if isinstance(remote, str) else (remote, local)
    streams = [str(x) for pair in zip(remotes, locals_) for x in pair]
    return run_node_ranks(["-c", CHILD, *streams], RANKS, env, timeout=120)


def _index_gets(s3_server, bucket: str, prefix: str = "ds") -> int:
    return s3_server.log.read_text(errors="replace").count(f'"GET /{bucket}/{prefix}/index.json ')


def test_one_get_of_the_index_per_node_and_job(s3_env, tmp_path):
    src = tmp_path / "src"
    write_dataset(src, 300, size_limit=8_000)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    env = dict(os.environ)
    remote, local = f"s3://{bucket}/ds", tmp_path / "cache"
    assert _node(remote, local, env) == ["300"] * RANKS
    assert _index_gets(s3_env, bucket) == 1
    assert _node(remote, local, env) == ["300"] * RANKS  # a new job run asks the remote again
    assert _index_gets(s3_env, bucket) == 2


def test_one_get_per_stream_when_the_streams_indexes_come_at_once(s3_env, tmp_path):
    """Every rank fetches its streams' indexes on several threads; the node still makes one
    GET of each."""
    bucket = s3_env.make_bucket()
    prefixes = ["a", "b", "c"]
    for k, prefix in enumerate(prefixes):
        write_dataset(tmp_path / "src" / prefix, 100 * (k + 1), size_limit=8_000)
        upload_dir(s3_env.client(), bucket, prefix, tmp_path / "src" / prefix)
    remotes = [f"s3://{bucket}/{prefix}" for prefix in prefixes]
    locals_ = [tmp_path / "cache" / prefix for prefix in prefixes]
    assert _node(remotes, locals_, dict(os.environ)) == ["600"] * RANKS
    assert [_index_gets(s3_env, bucket, prefix) for prefix in prefixes] == [1, 1, 1]


FORM_CHILD = """
import sys
from pathlib import Path
import streaming.cache.folder.parsed_index as index_form
from streaming.cache.folder.parsed_index import load_form
from streaming.cache.folder.origin import Origin
from streaming.format.index_columns import TemplateEntries
from streaming.dataset.catalog import Catalog
from streaming.stream import Stream
local = Path(sys.argv[2])
index_form.MIN_INDEX_BYTES = 0  # a small index gets a form too
import streaming.format.index as index_module
index_module.SCAN_FROM = 0  # and is read by the vectorised scan, whose columns a form keeps
catalog = Catalog.open([Stream(remote=sys.argv[1], local=str(local))])
form = load_form(local, Origin.read(local).index)
print(catalog.num_samples, isinstance(form.shards, TemplateEntries), form.num_samples)
"""


def test_the_node_reads_the_fetching_rank_s_columns(s3_env, tmp_path):
    src = tmp_path / "src"
    write_dataset(src, 200, size_limit=8_000)
    bucket = s3_env.make_bucket()
    upload_dir(s3_env.client(), bucket, "ds", src)
    local = tmp_path / "cache"
    run = subprocess.run([sys.executable, "-c", FORM_CHILD, f"s3://{bucket}/ds", str(local)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["200", "True", "200"]
    forms = [p.name for p in local.iterdir() if p.name.endswith(".npz")]
    assert len(forms) == 1
    from streaming.cache.folder.parsed_index import load_form
    from streaming.dataset.catalog import load_index
    from streaming.format.index import read_index

    loaded, parsed = load_index(local / "index.json"), read_index(local / "index.json")
    assert list(loaded.shards) == list(parsed.shards)
    assert list(loaded.basenames) == list(parsed.basenames)
    (local / "index.json").write_bytes((local / "index.json").read_bytes())  # a new file
    assert load_form(local, forms[0][len(".index.json."):-len(".npz")]) is None
