"""The driver of the standalone-cluster test (``test_spark_cluster.py``).

    python spark_cluster_job.py MASTER SERVICE_URL ADMIN_URL SOURCE TARGET OUTPUT CHECKPOINT

On the cluster at ``MASTER`` (two executors of one core each), it

1. reads the topic ``SOURCE`` as a stream from the earliest message to what it holds now
   (``trigger(availableNow=True)``) into Parquet files under ``OUTPUT``;
2. writes 1000 rows (``row-0`` ... ``row-999``) to the topic ``TARGET`` with a batch write.

Every row records the id of the executor that handled it (a Parquet column for the read, a
message property ``executor`` for the write), taken from the command line of the JVM the
Python worker serves, so the test can tell that both executors did part of each job.
Prints one JSON line: the number of block managers the driver knows (driver included).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def executor_id() -> str:
    """The ``--executor-id`` of the executor JVM above this Python worker (its first
    ``java`` ancestor); ``driver`` when there is none (a local master)."""
    pid = os.getpid()
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if name == "java":
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            if "--executor-id" in args:
                return args[args.index("--executor-id") + 1]
            return "driver"
        pid = int(rest.split()[1])  # the parent's pid
    return "driver"


def tag_read(frames: Iterator[Any]) -> Iterator[Any]:
    executor = executor_id()
    for frame in frames:
        yield frame.assign(executor=executor)


def tag_write(frames: Iterator[Any]) -> Iterator[Any]:
    executor = executor_id()
    for frame in frames:
        yield frame.assign(
            value="row-" + frame["id"].astype(str),
            __key="k" + (frame["id"] % 10).astype(str),
            executor=executor,
        )[["value", "__key", "executor"]]


def main(argv: list[str]) -> None:
    master, service_url, admin_url, source, target, output, checkpoint = argv
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("pulsar-cluster-test")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.executor.memory", "512m")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # both executors registered before the first job, so its tasks can spread
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    deadline = time.monotonic() + 90
    while status.size() < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()

    # 1. a streaming read of every partition of SOURCE into Parquet
    stream = (
        spark.readStream.format("pulsar")
        .option("service.url", service_url)
        .option("admin.url", admin_url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(
            "CAST(value AS STRING) AS value",
            "CAST(__key AS STRING) AS key",
            "__topic AS partition",
            "hex(__messageId) AS message_id",
        )
        .mapInPandas(
            tag_read,
            "value string, key string, partition string, message_id string, executor string",
        )
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming read failed: {query.exception()}")

    # 2. a batch write of 1000 rows to TARGET, four tasks
    rows = (
        spark.range(0, 1000, 1, 4)
        .mapInPandas(tag_write, "value string, __key string, executor string")
        .selectExpr("value", "__key", "map('executor', executor) AS __messageProperties")
    )
    (
        rows.write.format("pulsar")
        .option("service.url", service_url)
        .option("topic", target)
        .mode("append")
        .save()
    )
    print(json.dumps({"block_managers": status.size()}))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
