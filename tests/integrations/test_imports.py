"""`import streaming` stays free of training frameworks, `writers` of Ray and Dask; the HF glue
names its extra. One fresh interpreter answers all three, in that order: the first two
observe sys.modules, the last hides transformers (which the first showed was not imported)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("transformers", "accelerate", "lightning", "pytorch_lightning", "torchdata")

PROBE = f"""
import json, sys
def loaded(names):
    return sorted({{m.split('.')[0] for m in sys.modules}} & set(names))
answers = {{}}
import streaming, streaming.integrations, streaming.loader.dataloader
import streaming.packing.collate, streaming.packing.streaming
from streaming import StreamingDataset, StreamingDataLoader
answers["frameworks"] = loaded({FRAMEWORKS!r})
import writers, writers.convert
from writers.convert import ray_to_mds, dask_to_mds, dataframe_to_mds
answers["ray_dask"] = loaded(("ray", "dask", "distributed"))
sys.modules["transformers"] = None
from streaming.errors import MissingExtraError
try:
    import streaming.integrations.hf
    answers["hf"] = "imported"
except MissingExtraError as exc:
    answers["hf"] = str(exc)
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def answers() -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_streaming_does_not_import_frameworks(answers) -> None:
    assert answers["frameworks"] == []


def test_import_streaming_and_writers_does_not_import_ray_or_dask(answers) -> None:
    assert answers["ray_dask"] == []


def test_missing_transformers_names_the_extra(answers) -> None:
    assert "pip install 'mds-streaming[hf-trainer]'" in answers["hf"]
