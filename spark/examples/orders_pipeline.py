"""Orders pipeline: JSON orders from a Pulsar topic, totals per customer and 10-second
window, written to another topic and to Parquet.

    python spark/examples/orders_pipeline.py --service-url pulsar://localhost:6650 \\
        --admin-url http://localhost:8080 --produce 1000 --once

What it does, with ``format("pulsar")`` (installed with this project):

1. ``--produce N`` first publishes N sample orders to the topic ``orders``, as
   ``{"order_id": "o-120000-00001", "customer": "alice", "amount": 12.5, "ts": "...Z"}``, keyed by
   customer: with the official ``pulsar-client`` when it is installed, else with a Spark batch
   write (``df.write.format("pulsar")``).
2. A streaming query reads ``orders`` from the earliest message, parses the JSON and totals
   the orders per customer and 10-second event-time window. The watermark (event time minus
   10 seconds) decides when a window is final: a window is written once, when the watermark
   has passed its end, so the most recent windows wait for newer orders.
3. The totals go to the topic ``orders-totals`` (one JSON message per customer and window,
   keyed by customer) and to Parquet files under ``--output``.

Both outputs are exactly-once across restarts: each query checkpoints under
``OUTPUT/_checkpoints``, Parquet files are committed through the file sink's log, and the
Pulsar sink re-publishes a replayed micro-batch under the same producer names and sequence
ids, which the gateway drops as duplicates when the namespace has deduplication on
(``POST /admin/v2/namespaces/public/default/deduplication`` with ``true``).

``--once`` processes what the topic holds (``trigger(availableNow=True)``), prints a summary
and exits; without it the queries run every 5 seconds until Ctrl-C.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
from decimal import Decimal
from typing import Any

from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

#: The orders as they arrive; amounts are decimals so that totals are exact.
ORDER_SCHEMA = "order_id STRING, customer STRING, amount DECIMAL(10,2), ts TIMESTAMP"
WINDOW = "10 seconds"
#: How late an order may arrive and still count in its window.
WATERMARK = "10 seconds"
CUSTOMERS = ["alice", "bob", "carol", "dave", "erin", "frank"]
#: Some customers order more than others, so the top of the summary means something.
WEIGHTS = [6, 4, 3, 2, 1, 1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--service-url", default="pulsar://localhost:6650")
    parser.add_argument("--admin-url", default="http://localhost:8080")
    parser.add_argument("--topic", default="orders", help="where orders are read")
    parser.add_argument("--totals-topic", default="orders-totals", help="where totals go")
    parser.add_argument("--output", default="/tmp/orders-out", help="Parquet directory")
    parser.add_argument("--produce", type=int, default=0, metavar="N", help="publish N orders")
    parser.add_argument("--once", action="store_true", help="process what is there and exit")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    return parser.parse_args(argv)


# -- sample orders -------------------------------------------------------------------------


def sample_orders(count: int) -> list[dict[str, Any]]:
    """``count`` orders, four per second, ending about now."""
    rng = random.Random()
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    first = now - dt.timedelta(milliseconds=250 * count)
    orders = []
    for i in range(count):
        ts = first + dt.timedelta(milliseconds=250 * i)
        orders.append(
            {
                "order_id": f"o-{now:%H%M%S}-{i + 1:05d}",
                "customer": rng.choices(CUSTOMERS, WEIGHTS)[0],
                "amount": float(Decimal(rng.randint(500, 20_000)) / 100),
                "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            }
        )
    return orders


def produce(spark: SparkSession, args: argparse.Namespace, count: int) -> None:
    orders = sample_orders(count)
    try:
        import pulsar
    except ImportError:
        pulsar = None
    if pulsar is not None:
        # the official client, as any application publishing orders would
        client = pulsar.Client(
            args.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        try:
            producer = client.create_producer(args.topic, block_if_queue_full=True)
            for order in orders:
                ts = dt.datetime.fromisoformat(order["ts"].replace("Z", "+00:00"))
                producer.send_async(
                    json.dumps(order).encode(),
                    None,
                    partition_key=order["customer"],
                    event_timestamp=int(ts.timestamp() * 1000),
                )
            producer.flush()
        finally:
            client.close()
        how = "pulsar-client"
    else:
        # no client installed: Spark publishes them (bytes, as the client above would)
        rows = [(json.dumps(o).encode(), o["customer"]) for o in orders]
        frame = spark.createDataFrame(rows, "value BINARY, __key STRING")
        (
            frame.write.format("pulsar")
            .option("service.url", args.service_url)
            .option("topic", args.topic)
            .mode("append")
            .save()
        )
        how = "a Spark batch write"
    print(f"published {count} orders to {args.topic} with {how}")


# -- the pipeline --------------------------------------------------------------------------


def order_totals(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """Totals per customer and window, from the orders topic as a stream."""
    orders = (
        spark.readStream.format("pulsar")
        .option("service.url", args.service_url)
        .option("admin.url", args.admin_url)
        .option("topic", args.topic)
        .option("startingOffsets", "earliest")  # a new checkpoint starts at the beginning
        .load()
        # the message value is the JSON text; a row that does not parse is dropped
        .select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("order"))
        .select("order.*")
        .where(F.col("ts").isNotNull() & F.col("customer").isNotNull())
    )
    return (
        orders.withWatermark("ts", WATERMARK)
        .groupBy("customer", F.window("ts", WINDOW).alias("window"))
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
        .select(
            "customer",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "orders",
            "total",
        )
    )


def start_queries(
    totals: DataFrame, args: argparse.Namespace, checkpoints: str
) -> list[StreamingQuery]:
    def triggered(writer: DataStreamWriter) -> DataStreamWriter:
        if args.once:
            return writer.trigger(availableNow=True)  # what is there now, then stop
        return writer.trigger(processingTime="5 seconds")

    # 1. a JSON message per customer and window, keyed by customer, with the window's end
    #    as event time
    to_topic = triggered(
        totals.select(
            F.to_json(F.struct(*totals.columns)).alias("value"),
            F.col("customer").alias("__key"),
            F.col("window_end").alias("__eventTime"),
        )
        .writeStream.format("pulsar")
        .queryName("orders_totals_to_pulsar")
        .outputMode("append")
        .option("service.url", args.service_url)
        .option("topic", args.totals_topic)
        .option("checkpointLocation", f"{checkpoints}/totals-topic")
    ).start()
    # 2. the same rows as Parquet files
    to_parquet = triggered(
        totals.writeStream.format("parquet")
        .queryName("orders_totals_to_parquet")
        .outputMode("append")
        .option("path", args.output)
        .option("checkpointLocation", f"{checkpoints}/totals-parquet")
    ).start()
    return [to_topic, to_parquet]


def saved_totals(spark: SparkSession, output: str) -> int:
    """How many totals the Parquet output holds (0 before the first run)."""
    if "://" not in output and not os.path.isdir(output):
        return 0
    try:
        return spark.read.parquet(output).count()
    except AnalysisException:  # no output yet
        return 0


def summary(spark: SparkSession, args: argparse.Namespace, before: int) -> None:
    results = spark.read.parquet(args.output)
    total = results.count()
    print(
        f"this run: {total - before} window totals written to {args.totals_topic} "
        f"and to Parquet under {args.output}"
    )
    windows = results.select("window_start").distinct().count()
    print(f"in {args.output}: {total} totals over {windows} windows")
    print("top customers:")
    top = (
        results.groupBy("customer")
        .agg(F.sum("orders").alias("orders"), F.sum("total").alias("total"))
        .orderBy(F.desc("total"))
        .limit(5)
        .collect()
    )
    for row in top:
        print(f"  {row.customer:<8} {row.orders:>5} orders  {row.total:>10}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Spark's Python workers run `python3` from PATH unless told otherwise: use this
    # interpreter, which has pyspark, pyarrow and the pulsar data source installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("orders-pipeline")
        # a few shuffle partitions suit a small aggregation (Spark's default is 200)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        # streaming queries do without adaptive execution (Spark warns otherwise)
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    try:
        if args.produce:
            produce(spark, args, args.produce)
        before = saved_totals(spark, args.output)
        queries = start_queries(order_totals(spark, args), args, f"{args.output}/_checkpoints")
        try:
            if args.once:
                for query in queries:
                    query.awaitTermination()
            else:
                spark.streams.awaitAnyTermination()  # until Ctrl-C (or a failure)
        except KeyboardInterrupt:
            print("stopping")
        except StreamingQueryException as exc:
            print(f"a query failed: {exc}", file=sys.stderr)
            return 1
        finally:
            for query in queries:
                query.stop()
        summary(spark, args, before)
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
