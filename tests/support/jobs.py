"""Launch simulated multi-node training jobs as real processes and collect what each rank saw.

Each rank runs `run_rank.py` in its own process (a fork of `run_rank_forks.py`, which imported
torch once) with torch.distributed's environment variables (gloo over 127.0.0.1); simulated node n
caches shards in `<local_root>/node<n>` over one shared file:// source, exactly as separate
machines would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import free_port

REPO = Path(__file__).resolve().parents[2]
FORKER = Path(__file__).with_name("run_rank_forks.py")
RUNNER = Path(__file__).with_name("run_rank.py")


@dataclass
class RankResult:
    """What one rank wrote: its per-batch ids by epoch, len(ds), a saved state or an error."""

    rank: int
    returncode: int
    batches: dict[int, list[list[int]]] = field(default_factory=dict)
    length: int | None = None
    state: dict | None = None
    error: str | None = None
    killed_at: float | None = None
    error_at: float | None = None
    stderr: str = ""

    @classmethod
    def read(cls, rank: int, returncode: int, path: Path, stderr: str) -> RankResult:
        result = cls(rank, returncode, stderr=stderr)
        if not path.exists():
            return result
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "ids" in rec:
                result.batches.setdefault(rec["epoch"], []).append(rec["ids"])
            elif "len" in rec:
                result.length = rec["len"]
            elif "state" in rec:
                result.state = rec["state"]
            elif "killed" in rec:
                result.killed_at = rec["killed"]
            elif "error" in rec:
                result.error, result.error_at = rec["error"], rec["t"]
        return result


class ForkedJob:
    """A running job of nodes x ranks_per_node rank processes, forks of one launcher that
    imported torch once (`run_rank_forks.py`): each rank has its own environment, DataLoader
    workers and exit, as torchrun's ranks do. `env` adds variables to every rank's environment;
    `wait()` collects the results."""

    def __init__(self, workdir: Path, sources: list[str], *, nodes: int = 2,
                 ranks_per_node: int = 2, local_root: Path | None = None,
                 extra: list[str] | None = None, tag: str = "run",
                 env: dict[str, str] | None = None, script: Path | None = None) -> None:
        """`script` (with `extra` as its whole argv) replaces run_rank.py."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.tag = tag
        world, port = nodes * ranks_per_node, free_port()
        self.ranks = [(rank, workdir / f"{tag}.rank{rank}") for rank in range(world)]
        plan = [{"env": {"RANK": str(rank), "WORLD_SIZE": str(world),
                         "LOCAL_RANK": str(rank % ranks_per_node),
                         "LOCAL_WORLD_SIZE": str(ranks_per_node), "MASTER_ADDR": "127.0.0.1",
                         "MASTER_PORT": str(port)},
                 "script": str(script or RUNNER),
                 "argv": list(extra or []) if script else [
                     "--sources", *sources, "--local-root", str(local_root or workdir / "local"),
                     "--out", f"{base}.jsonl", *(extra or [])],
                 "stderr": f"{base}.err", "rc": f"{base}.rc"} for rank, base in self.ranks]
        plan_file = workdir / f"{tag}.plan.json"
        plan_file.write_text(json.dumps(plan))
        launcher_env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **(env or {}))
        self.launcher = subprocess.Popen(
            [sys.executable, str(FORKER), str(plan_file)], env=launcher_env, cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)

    def wait(self, timeout: float = 120.0) -> list[RankResult]:
        try:
            _, stderr = self.launcher.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.launcher.pid, signal.SIGKILL)
            self.launcher.communicate()
            late = [rank for rank, base in self.ranks if not Path(f"{base}.rc").exists()]
            raise AssertionError(f"{self.tag}: ranks {late} did not finish in {timeout} s") \
                from None
        assert self.launcher.returncode == 0, stderr[-3000:]
        results = []
        for rank, base in self.ranks:
            code = int(Path(f"{base}.rc").read_text())
            results.append(RankResult.read(rank, code, Path(f"{base}.jsonl"),
                                           Path(f"{base}.err").read_text()))
        return results


def run_job(workdir: Path, sources: list[str], **kwargs) -> list[RankResult]:
    """Run a job to completion; every rank must exit 0."""
    results = ForkedJob(workdir, sources, **kwargs).wait()
    for r in results:
        assert r.returncode == 0, f"rank {r.rank} exited {r.returncode}:\n{r.stderr[-4000:]}"
    return results


def global_batches(results: list[RankResult], epoch: int = 0) -> list[list[int]]:
    """Global batch g = the union of every rank's batch g."""
    per_rank = [r.batches.get(epoch, []) for r in results]
    count = len(per_rank[0])
    assert all(len(b) == count for b in per_rank), [len(b) for b in per_rank]
    return [[i for rank in per_rank for i in rank[g]] for g in range(count)]


def epoch_ids(results: list[RankResult], epoch: int = 0) -> list[int]:
    return [i for r in results for batch in r.batches.get(epoch, []) for i in batch]
