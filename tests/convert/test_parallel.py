"""Parallel parts give the single-process dataset; interrupted conversions resume exactly."""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from streaming.errors import CoordinationError, OutputExistsError
from tests.support.converted import read_samples
from writers.convert import api, convert, parallel
from writers.convert.parallel import DONE_FILE


def make_jsonl(path: Path, n: int = 2000) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": i, "text": "é" * (i % 50), "t": [i, i + 1]}) + "\n")
    return path


def make_csv(path: Path, n: int = 1500) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "text"])
        writer.writerows([i, f'q"uo,te\n{i}' if i % 3 else "plain"] for i in range(n))
    return path


@pytest.fixture
def small_parts(monkeypatch):
    """Small part sizes so a few KB of input makes several parts."""
    monkeypatch.setattr(api, "PART_BYTES", 8 << 10)
    monkeypatch.setattr(api, "PART_ROWS", 100)


@pytest.mark.slow
@pytest.mark.parametrize("maker", [make_jsonl, make_csv])
def test_workers_do_not_change_content_or_order(tmp_path: Path, maker, small_parts):
    src = maker(tmp_path / ("in.jsonl" if maker is make_jsonl else "in.csv"))
    outputs = []
    for workers in (1, 2, 3):
        result = convert(src, tmp_path / f"w{workers}", workers=workers, size_limit="16kb",
                         progress=False)
        assert result.parts >= 3
        outputs.append(read_samples(tmp_path / f"w{workers}"))
    assert outputs[0] == outputs[1] == outputs[2]
    assert [s["id"] for s in outputs[0]] == [str(i) if maker is make_csv else i
                                             for i in range(len(outputs[0]))]


class FailOnce:
    """A transform that fails on one record while its flag file exists."""

    def __init__(self, flag: Path, at: int, kill: bool) -> None:
        self.flag, self.at, self.kill = flag, at, kill

    def __call__(self, record: dict) -> dict:
        if record["id"] == self.at and self.flag.exists():
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("injected failure")
        return record


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "kill"), [(1, False), (2, False), (2, True)])
def test_interrupted_conversion_resumes_to_the_same_dataset(tmp_path: Path, small_parts,
                                                             workers, kill):
    src = make_jsonl(tmp_path / "in.jsonl")
    convert(src, tmp_path / "clean", workers=workers, progress=False)
    flag = tmp_path / "fail"
    flag.touch()
    transform = FailOnce(flag, at=1500, kill=kill)
    out = tmp_path / "out"
    error = CoordinationError if kill else RuntimeError
    with pytest.raises(error):
        convert(src, out, workers=workers, transform=transform, progress=False)
    assert not (out / "index.json").exists()  # nothing half-published
    done_before = {p.name for p in out.glob("part*") if (p / DONE_FILE).exists()}
    assert done_before  # the parts before the failure are kept
    flag.unlink()
    result = convert(src, out, workers=workers, transform=transform, progress=False)
    assert result.skipped_parts >= len(done_before)
    assert result.samples == 2000
    assert read_samples(out) == read_samples(tmp_path / "clean")
    # A finished conversion re-run is a no-op that keeps the dataset.
    again = convert(src, out, workers=workers, transform=transform, progress=False)
    assert again.skipped_parts == again.parts and again.samples == 2000


def test_resume_guards(tmp_path: Path, small_parts):
    src = make_jsonl(tmp_path / "in.jsonl", 300)
    out = tmp_path / "out"
    convert(src, out, progress=False)
    with pytest.raises(OutputExistsError, match="resume=False"):
        convert(src, out, compression="gz", progress=False)
    result = convert(src, out, compression="gz", resume=False, progress=False)
    assert result.skipped_parts == 0
    assert json.loads((out / "index.json").read_text())["shards"][0]["compression"] == "gz"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="foreign"):
        convert(src, foreign, progress=False)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_unordered_output_has_every_sample(tmp_path: Path, small_parts):
    src = make_jsonl(tmp_path / "in.jsonl", 800)
    convert(src, tmp_path / "out", workers=2, ordered=False, progress=False)
    ids = sorted(s["id"] for s in read_samples(tmp_path / "out"))
    assert ids == list(range(800))


@pytest.mark.slow
def test_deadline_stops_workers_promptly(tmp_path: Path, small_parts):
    src = make_jsonl(tmp_path / "in.jsonl", 400)

    def slow(record):
        if record["id"] >= 300:  # the last part would take 20 s; column inference stays fast
            time.sleep(0.2)
        return record

    started = time.monotonic()
    with pytest.raises(TimeoutError, match="deadline"):
        convert(src, tmp_path / "out", workers=2, transform=slow, timeout=0.5, progress=False)
    assert time.monotonic() - started < 10
    assert not (tmp_path / "out" / "index.json").exists()


@pytest.mark.slow
def test_a_worker_killed_while_reporting_progress_fails_the_conversion_without_a_hang(
        tmp_path: Path, small_parts, monkeypatch):
    src = make_jsonl(tmp_path / "in.jsonl")
    convert(src, tmp_path / "clean", workers=2, progress=False)
    flag = tmp_path / "die"
    flag.touch()
    report = parallel.report_progress

    def dying(progress, slot, units, samples):  # in a forked worker: the first report kills it
        try:
            flag.unlink()
        except FileNotFoundError:
            return report(progress, slot, units, samples)
        progress[2 * slot] += units
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(parallel, "REPORT_EVERY", 50)
    monkeypatch.setattr(parallel, "report_progress", dying)
    out = tmp_path / "out"
    raised: list[BaseException] = []

    def run() -> None:
        try:
            convert(src, out, workers=2, progress=True)
        except BaseException as exc:  # handed to the test thread
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the conversion hung after a worker died while reporting"
    assert len(raised) == 1 and isinstance(raised[0], CoordinationError), raised
    monkeypatch.setattr(parallel, "report_progress", report)
    convert(src, out, workers=2, progress=False)
    assert read_samples(out) == read_samples(tmp_path / "clean")
