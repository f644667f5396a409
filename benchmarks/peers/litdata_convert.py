"""Convert a cached benchmark corpus (bench-data/corpus/<name>) to LitData's format.

Runs inside .bench-venvs/litdata (LitData has its own chunk format, so it cannot read MDS):

    .bench-venvs/litdata/bin/python benchmarks/peers/litdata_convert.py CORPUS_DIR OUT_DIR

The samples are the same as the MDS ones: {id, text, tokens} or {id, blob}. A `done` marker is
written last, so an interrupted conversion is redone.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

_corpus: dict = {}


def _load(folder: str) -> dict:
    if not _corpus:
        path = Path(folder)
        _corpus["values"] = np.load(path / "values.npy", mmap_mode="r")
        _corpus["offsets"] = np.load(path / "offsets.npy")
        _corpus["texts"] = json.loads((path / "texts.json").read_text())
    return _corpus


def make_sample(job: tuple[str, int]) -> dict:
    folder, i = job
    c = _load(folder)
    a, b = int(c["offsets"][i]), int(c["offsets"][i + 1])
    chunk = np.asarray(c["values"][a:b])
    if c["texts"] is None:
        return {"id": i, "blob": chunk.tobytes()}
    return {"id": i, "text": c["texts"][i], "tokens": chunk}


def main() -> None:
    import litdata

    corpus, out = sys.argv[1], Path(sys.argv[2])
    if (out / "done").exists():
        return
    shutil.rmtree(out, ignore_errors=True)
    n = len(np.load(Path(corpus) / "offsets.npy")) - 1
    litdata.optimize(fn=make_sample, inputs=[(corpus, i) for i in range(n)],
                     output_dir=str(out), chunk_bytes="64MB", num_workers=2,
                     mode="overwrite", verbose=False)
    (out / "done").write_text("{}")


if __name__ == "__main__":
    main()
