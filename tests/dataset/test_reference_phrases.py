"""Our errors and warnings contain the reference's key phrases (users and their tests match on
them), with the builtin exception type the reference raises; the same table run through the
reference (in its own venv) proves each phrase is really the reference's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from streaming import MDSWriter, Stream, StreamingDataset
from tests.dataset.reference_phrase_cases import CASES, Api, Case, Outcome, outcome, prepare
from tests.parity.test_reference_parity import reference_python, without_reference

OURS = Api(MDSWriter, StreamingDataset, Stream)
SCRIPT = Path(__file__).with_name("reference_phrase_cases.py")


def assert_outcome(case: Case, got: Outcome) -> None:
    """`got` has the case's type (or only warned, for a warning) and contains its phrase."""
    assert case.kind in got.types, f"expected {case.kind}, got {got.types}: {got.message}"
    assert case.phrase in got.message, f"{case.phrase!r} is not in {got.message!r}"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("phrases")
    prepare(OURS, root)
    return root


@pytest.fixture(scope="module")
def reference_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    python = reference_python()
    if python is None:
        without_reference("the reference implementation's venv is missing: run `make "
                          "reference-venv` or set STREAMING_REFERENCE_PYTHON to its python")
    root = tmp_path_factory.mktemp("reference-phrases")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # never our `streaming`
    done = subprocess.run([str(python), str(SCRIPT), str(root)], cwd=root, env=env, text=True,
                          capture_output=True, timeout=180)
    if done.returncode != 0:
        without_reference(f"{python} could not run the cases: {done.stderr.strip()[-600:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: Outcome(**value) for name, value in found.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_our_message_holds_the_references_phrase(data: Path, name: str) -> None:
    assert_outcome(CASES[name], outcome(CASES[name], OURS, data))


@pytest.mark.parametrize("name", list(CASES))
def test_the_reference_says_the_phrase_too(reference_outcomes: dict[str, Outcome],
                                           name: str) -> None:
    assert_outcome(CASES[name], reference_outcomes[name])
