"""``format("pulsar")`` for PySpark: the gateway's topics as Spark DataFrames and streams.

Installing the project is enough: PySpark registers, at a session's first data source
lookup, every top-level module named ``pyspark_*`` that defines a ``DefaultSource``
(``pyspark.sql.worker.lookup_data_sources``). :func:`register` does it explicitly, for a
session that started before the package was importable.

Reads go straight to the gateways' Redis from the executors, writes through a gateway's
binary protocol; ``docs/spark.md`` has the options, columns and offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_pulsar.source import PulsarDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DefaultSource", "PulsarDataSource", "register"]

#: What PySpark's automatic registration looks for.
DefaultSource = PulsarDataSource


def register(spark: SparkSession) -> None:
    """Make ``format("pulsar")`` available in ``spark`` (automatic once installed)."""
    spark.dataSource.register(PulsarDataSource)
