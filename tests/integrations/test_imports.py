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


LAZY_PROBE = """
import json, sys
import streaming, streaming.base, streaming.dataset, writers
answers = {"torch_at_import": "torch" in sys.modules}
from streaming import MDSWriter
answers["torch_after_writer"] = "torch" in sys.modules
packages = {"streaming": streaming, "streaming.base": streaming.base,
            "streaming.dataset": streaming.dataset, "writers": writers}
answers["same"] = all(getattr(p, n) is getattr(streaming if n != "merge_index" else writers, n)
                      for p in packages.values() for n in p.__all__)
answers["listed"] = all(set(p.__all__) <= set(dir(p)) for p in packages.values())
try:
    streaming.dataset.Stream
except AttributeError as exc:
    answers["unknown"] = str(exc)
print(json.dumps(answers))
"""


def test_the_packages_export_lazily_from_one_table() -> None:
    """streaming, streaming.base, streaming.dataset and writers resolve their exports through
    streaming.exports: the same objects, torch imported only when a name needs it, and a name a
    package does not export refused as before."""
    result = subprocess.run([sys.executable, "-c", LAZY_PROBE], cwd=REPO, capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers == {"torch_at_import": False, "torch_after_writer": False, "same": True,
                       "listed": True,
                       "unknown": "module 'streaming.dataset' has no attribute 'Stream'"}
