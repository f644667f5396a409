"""`import streaming` stays free of training frameworks; the HF glue names its extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("transformers", "accelerate", "lightning", "pytorch_lightning", "torchdata")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(REPO)})


def test_import_streaming_does_not_import_frameworks() -> None:
    code = ("import sys, streaming, streaming.integrations, streaming.loader.dataloader, "
            "streaming.packing.collate, streaming.packing.streaming\n"
            "from streaming import StreamingDataset, StreamingDataLoader\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))")
    result = run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_import_streaming_and_writers_does_not_import_ray_or_dask() -> None:
    code = ("import sys, streaming, streaming.integrations, writers, writers.convert\n"
            "from streaming import StreamingDataset\n"
            "from writers.convert import ray_to_mds, dask_to_mds, dataframe_to_mds\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'dask', "
            "'distributed'}))")
    result = run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_missing_transformers_names_the_extra() -> None:
    code = ("import sys; sys.modules['transformers'] = None\n"
            "from streaming.errors import MissingExtraError\n"
            "try:\n    import streaming.integrations.hf\n"
            "except MissingExtraError as exc:\n    print(exc)\n")
    result = run(code)
    assert result.returncode == 0, result.stderr
    assert "pip install 'mds-streaming[hf-trainer]'" in result.stdout
