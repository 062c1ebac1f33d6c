"""A streaming job the exactly-once test kills and restarts: a topic into Parquet files.

    python spark_stream_job.py SERVICE_URL ADMIN_URL TOPIC OUTPUT CHECKPOINT MAX_ENTRIES

Reads ``TOPIC`` from the earliest message (``maxEntriesPerTrigger`` entries per micro-batch,
one every 500 ms, so the job takes several batches) and appends the value and message id of
each message to Parquet files under ``OUTPUT``, checkpointing in ``CHECKPOINT``. Runs until
killed. The file sink's own log (``OUTPUT/_spark_metadata``) makes its output exactly-once
for Spark readers, so what is read back shows exactly what the source delivered.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    service_url, admin_url, topic, output, checkpoint, max_entries = argv
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pulsar-exactly-once-job")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = (
        spark.readStream.format("pulsar")
        .option("service.url", service_url)
        .option("admin.url", admin_url)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxEntriesPerTrigger", max_entries)
        .load()
    )
    query = (
        frame.selectExpr("CAST(value AS STRING) AS value", "__messageId AS id")
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1:])
