"""What the Spark tests share: one local Spark session per test module, and helpers to read
the ``pulsar`` format against a test gateway and to run streaming queries to completion.

A module uses the session with ``from tests.integration.spark.spark_fixtures import spark`` (a
module-scoped fixture: starting Spark costs ~8 s, so every test of the module shares one,
``local[2]`` with no UI, stopped at the module's end).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TIMEOUT, GatewayThread, wait_for

__all__ = [
    "Collected",
    "env_for_subprocess",
    "read",
    "read_stream",
    "run_available_now",
    "run_until",
    "spark",
    "spark_env",
]


def spark_env() -> dict[str, str]:
    """What a Spark driver needs in its environment before its JVM starts (loopback only,
    Python workers on this interpreter)."""
    return {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local Spark session for the whole module, stopped at its end."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in spark_env().items():
            patch.setenv(name, value)
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("pulsar-gateway-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            # a test's streaming query stops at once, not after Spark's 10 s grace
            .config("spark.sql.streaming.stopTimeout", "5s")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


def read(spark: Any, gw: GatewayThread, **options: str) -> Any:
    """``spark.read.format("pulsar")`` at ``gw`` with ``options`` (``load()`` not called)."""
    reader = (
        spark.read.format("pulsar").option("service.url", gw.url).option("admin.url", gw.http_url)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def read_stream(spark: Any, gw: GatewayThread, **options: str) -> Any:
    """``spark.readStream.format("pulsar")`` at ``gw`` with ``options``."""
    reader = (
        spark.readStream.format("pulsar")
        .option("service.url", gw.url)
        .option("admin.url", gw.http_url)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


class Collected:
    """A ``foreachBatch`` sink that keeps every micro-batch's rows, per batch id."""

    def __init__(self) -> None:
        self.batches: dict[int, list[Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = frame.collect()
        with self._lock:
            self.batches[batch_id] = rows

    @property
    def rows(self) -> list[Any]:
        with self._lock:
            return [row for batch_id in sorted(self.batches) for row in self.batches[batch_id]]

    def count(self) -> int:
        return len(self.rows)


def run_available_now(frame: Any, checkpoint: Path, sink: Collected, timeout: float = 60) -> None:
    """Run ``frame`` into ``sink`` with ``trigger(availableNow=True)`` until it stops."""
    query = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(timeout), "the availableNow query did not finish"
    finally:
        query.stop()


def run_until(
    frame: Any,
    checkpoint: Path,
    sink: Collected,
    done: Callable[[], bool],
    *,
    interval: str = "200 milliseconds",
    timeout: float = 6 * TIMEOUT,
) -> None:
    """Run ``frame`` into ``sink`` on a processing-time trigger until ``done()``."""
    query = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=interval)
        .start()
    )
    try:

        def finished() -> bool:
            if query.exception() is not None:
                raise AssertionError(f"the query failed: {query.exception()}")
            return done()

        wait_for(finished, timeout, interval=0.1)
    finally:
        query.stop()


def env_for_subprocess() -> dict[str, str]:
    """The environment of a Spark driver started as a subprocess of the tests."""
    return {**os.environ, **spark_env()}
