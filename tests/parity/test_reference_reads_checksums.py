"""The reference implementation reads what our writer produces by default: zstd frames with
their content checksum and indexes with an xxh64 digest per file (also with its own
validate_hash="xxh64")."""

from __future__ import annotations

import json
import os
import subprocess

from tests.parity.test_reference_parity import reference_python, without_reference
from writers.mds import MDSWriter

READ = """
import json, os, sys, sysconfig, types
# the reference's streaming.base without its package file (see reference_plan.py)
package = types.ModuleType("streaming")
package.__path__ = [os.path.join(sysconfig.get_paths()["purelib"], "streaming")]
sys.modules["streaming"] = package
from streaming.base import StreamingDataset
remote, local = sys.argv[1:3]
out = {}
for algo in (None, "xxh64"):
    ds = StreamingDataset(remote=remote, local=f"{local}-{algo}", validate_hash=algo,
                          batch_size=1)
    out[str(algo)] = [int(ds[i]["id"]) for i in range(ds.num_samples)]
print(json.dumps(out))
"""


def test_the_reference_reads_checksummed_zstd_and_xxh64_indexes(tmp_path):
    python = reference_python()
    if python is None:
        without_reference("the reference implementation's venv is missing: run `make "
                          "reference-venv` or set STREAMING_REFERENCE_PYTHON to its python")
    with MDSWriter(columns={"id": "int", "text": "str"}, out=str(tmp_path / "ds"),
                   compression="zstd", size_limit=2_000) as writer:
        for i in range(300):
            writer.write({"id": i, "text": f"sample {i} " * (i % 9)})
    index = json.loads((tmp_path / "ds" / "index.json").read_text())
    assert len(index["shards"]) > 1 and "xxh64" in index["shards"][0]["zip_data"]["hashes"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # never our `streaming`
    done = subprocess.run([str(python), "-c", READ, str(tmp_path / "ds"),
                           str(tmp_path / "cache")], env=env, text=True,
                          capture_output=True, timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read == {"None": list(range(300)), "xxh64": list(range(300))}
