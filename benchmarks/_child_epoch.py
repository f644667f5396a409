"""One timed DataLoader epoch in a fresh interpreter, for benchmarks that compare ways of reading
in alternating processes (page_reads.py, limited_reads.py): `run` starts a child script and
returns the JSON it prints; the child calls `timed` on its loader."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def timed(loader: Any) -> dict:
    """Samples, wall seconds and CPU seconds (this process and its finished children: the
    DataLoader workers) of one pass over `loader`."""
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF)
    n = 0
    it = iter(loader)
    for batch in it:
        n += len(batch["id"])
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    del it  # joins the workers, so their CPU is counted below
    main = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"samples": n, "wall": wall, "cpu": main + kids.ru_utime + kids.ru_stime}


def run(child: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run `child` (Python source that prints one JSON line last) with `args` as sys.argv[1:]
    (and `env` added to the environment); it can `from _child_epoch import timed`."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r})\n{child}"
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True,
                         text=True, cwd=tempfile.gettempdir(),
                         env=None if env is None else {**os.environ, **env})
    return json.loads(out.stdout.strip().splitlines()[-1])
