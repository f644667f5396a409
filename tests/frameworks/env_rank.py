"""The processes of a simulated SLURM or MPI job (tests/frameworks).

`python env_rank.py DATA OUT RANK_ENVS_JSON`: imports the library once, then forks one process
per rank; each adds its rank's launcher variables (and nothing else) to its environment,
iterates a StreamingDataset over DATA and writes its sample ids and the World it found to
OUT/rank<R>.json. Exits non-zero if any rank fails or outlives the deadline.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streaming import StreamingDataset

DEADLINE = 90.0  # seconds for all ranks together


def rank_main(data: str, out: Path, rank: int, env: dict[str, str]) -> None:
    os.environ.update(env)
    ds = StreamingDataset(local=data, shuffle=True, batch_size=2)
    ids = [int(sample["id"]) for sample in ds]
    (out / f"rank{rank}.json").write_text(json.dumps({"world": asdict(ds.world), "ids": ids}))
    ds.close()


def main() -> int:
    data, out, envs = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=rank_main, args=(data, out, rank, env))
             for rank, env in enumerate(envs)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(DEADLINE)
    codes = [proc.exitcode for proc in procs]
    for proc in procs:
        proc.kill()
    print(json.dumps({"exit_codes": codes}))
    return 0 if codes == [0] * len(procs) else 1


if __name__ == "__main__":
    sys.exit(main())
