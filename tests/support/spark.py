"""A local-mode Spark session whose Python workers see a given environment.

The JVM that py4j starts for the first session of a test process keeps the environment it was
started with, and later sessions reuse it; so the variables a test needs (interpreter, checkout,
emulator endpoints and credentials) are also passed per session as `spark.executorEnv.*`, which
Spark hands to the Python workers of that session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[2])


@contextmanager
def local_spark(app: str, env: dict[str, str]) -> Iterator[object]:
    """A `local[2]` SparkSession whose workers run this interpreter on this checkout with `env`;
    stopped, and os.environ restored, on exit."""
    from pyspark.sql import SparkSession

    env = {"PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
           **env}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    builder = (SparkSession.builder.master("local[2]").appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in env.items():
        builder = builder.config(f"spark.executorEnv.{key}", value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
