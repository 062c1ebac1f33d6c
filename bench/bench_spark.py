"""Spark data source benchmark: ``format("pulsar")`` reads against raw redis-py on the same Redis.

Usage::

    .venv/bin/python bench/bench_spark.py [--messages N] [--quick] [--passes K]
                                          [--stream-seconds S] [--stream-rate R]
                                          [--fill {spark,client}] [--json PATH]

One run starts its own redis-server (temp dir, free port, no RDB snapshots, AOF off), one
gateway subprocess on it (helpers shared with ``bench/harness.py``) and one local Spark session
(``local[2]``: two task slots, Python workers forked by ``pyspark.daemon`` under the JVM),
then measures, with 100-byte payloads:

1. batch read throughput, on a topic with 2 partitions holding N messages (default
   1,000,000; 100,000 with ``--quick``), filled (untimed) twice:

   a. one message per entry: ``df.write.format("pulsar")`` with
      ``pulsar.producer.batchingMaxMessages=1`` (each entry a batch of one, as the official
      client with batching on stores a lone message; ``--fill client`` fills with the
      official client, batching off, i.e. entries in the non-batched format);
   b. 100 messages per entry: the same writer with ``batchingMaxMessages=100`` (or the
      official client batching 100 messages per entry).

   The stream lengths are checked (N entries for a, N/100 for b). Timed:
   ``spark.read.format("pulsar").option("topic", ...).load()`` then
   ``df.write.format("noop").mode("overwrite").save()``, which has the executors read both
   partition streams (two tasks in parallel), decode every message and hand all columns to the
   JVM as Arrow batches; rows/s over the wall time of that action, median of ``--passes``
   (default 3; 1 with ``--quick``). An untimed ``count()`` before the passes checks the row
   count and warms the Python workers. The same action on a topic of one message per
   partition, timed 3 times first, shows the fixed cost every read action pays (wall time
   and CPU; the report also gives the per-row CPU net of it).

   Raw in the same run, interleaved with the Spark passes: redis-py (hiredis) ``XRANGE ...
   COUNT 1024`` loops over the same two streams, one process per stream (multiprocessing,
   spawned and connected before the clock starts), so raw is 2-way parallel too; a reader
   re-reads its stream until 0.5 s have passed, so small streams still time. Raw delivers
   entries: for (b) its "messages" are the 100 per entry still packed, never unpacked. The
   ratio is Spark rows/s / raw messages/s; for (a) the aim is at least 0.5.

   CPU: the JVM (driver and executors in local mode) and its Python descendants (the
   ``pyspark.daemon`` and the workers it forks, plus any planner worker), read from /proc via
   psutil (``utime + stime``, and the reaped children's ``cutime + cstime`` so a worker that
   exits mid-action still counts) before and after the action, per row; Redis likewise.
   The raw readers report their own ``os.times()`` per entry.

2. streaming end-to-end latency: ``spark.readStream.format("pulsar")`` from ``latest`` on a
   2-partition topic, ``trigger(processingTime="1 second")``, a ``foreachBatch`` sink that
   collects ``unix_millis(__publishTime)`` to the driver and records ``now_ms - publish_ms``
   per row. Once the query has run its first (empty) batch, the official client (batching
   off, ``send_async``) publishes ``--stream-rate`` messages/s (default 1,000) for
   ``--stream-seconds`` (default 20; 5 with ``--quick``); the query runs until every message
   arrived. p50 / p99 / max latency against what a 1 s trigger alone implies: a message waits
   for the next trigger, uniformly 0-1 s (p50 0.5 s, max 1 s), plus the micro-batch's own
   duration (``recentProgress`` ``triggerExecution``).

The machine is shared by Spark, Redis, the gateway and this process: compare the ratios in
one run rather than absolute figures across runs. Robustness: every wait has a timeout; the
watchdog of ``bench/harness.py`` ends the run (gateway SIGTERM, redis-server stop, temp dir
removal; the Spark JVM exits with this process) when a phase overruns or the gateway dies.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing as mp
import os
import platform
import queue
import secrets
import shlex
import statistics
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import psutil
import redis

from harness import (
    KEY_PREFIX,
    NAMESPACE,
    PAYLOAD_SIZE,
    BenchEnv,
    BenchError,
    GatewayProcess,
    RedisServer,
    fmt_rate,
    git_describe,
    median,
    run_cli,
    wait_until,
)
from pulsar_gateway.core.storage.keys import KeySchema

PARTITIONS = 2
BATCH_SIZE = 100  # messages per entry in case (b)
XRANGE_COUNT = 1024  # the source's READ_CHUNK
RAW_MIN_SECONDS = 0.5  # raw readers re-read a small stream until this much time has passed
TRIGGER_SECONDS = 1.0


# -- raw redis-py readers (spawned processes) ----------------------------------------------


def _raw_reader(port: int, key: str, min_seconds: float, go: Any, out: Any) -> None:
    """One raw reader: connect, report ready, wait for ``go``, XRANGE the whole stream, again
    until ``min_seconds`` have passed (so a small stream still gives a measurable time)."""
    r = redis.Redis(host="127.0.0.1", port=port, protocol=2)
    r.ping()
    out.put(("ready", key))
    if not go.wait(120):
        out.put(("error", "never told to start"))
        return
    c0 = os.times()
    t0 = time.monotonic()
    entries = passes = 0
    while passes == 0 or time.monotonic() - t0 < min_seconds:
        low = "-"
        while True:
            chunk = r.xrange(key, low, "+", XRANGE_COUNT)
            entries += len(chunk)
            if len(chunk) < XRANGE_COUNT:
                break
            low = "(" + chunk[-1][0].decode()
        passes += 1
    t1 = time.monotonic()
    c1 = os.times()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    out.put(("done", key, entries, t0, t1, cpu, passes))
    r.close()


def raw_xrange(
    port: int, keys: list[str], min_seconds: float, timeout: float
) -> tuple[dict[str, tuple[int, int]], float, float]:
    """Read every key in parallel, one spawned process each, each at least ``min_seconds``;
    ({key: (entries read, whole passes)}, wall, client CPU s)."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_raw_reader, args=(port, k, min_seconds, go, out), daemon=True)
        for k in keys
    ]
    for p in procs:
        p.start()
    try:
        for _ in keys:
            kind, *rest = out.get(timeout=60)
            if kind != "ready":
                raise BenchError(f"raw reader: {rest}")
        t_go = time.monotonic()
        go.set()
        done = []
        for _ in keys:
            kind, *rest = out.get(timeout=timeout)
            if kind != "done":
                raise BenchError(f"raw reader: {rest}")
            done.append(rest)
        for p in procs:
            p.join(10)
    except queue.Empty:
        raise BenchError("a raw reader did not answer in time") from None
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
    wall = max(d[3] for d in done) - t_go
    return {d[0]: (d[1], d[5]) for d in done}, wall, sum(d[4] for d in done)


# -- CPU of the Spark processes --------------------------------------------------------------


def _cpu(proc: psutil.Process, children: bool) -> float:
    t = proc.cpu_times()
    total = t.user + t.system
    if children:
        total += t.children_user + t.children_system
    return total


class SparkCpu:
    """CPU seconds of the Spark JVM (own threads) and of its Python descendants.

    A Python worker that exits is reaped by its parent (the daemon or the JVM), whose
    ``children_*`` times then include it; so the Python figure is every live Python
    descendant's own and reaped-children times plus the JVM's reaped-children times.
    """

    def __init__(self, jvm: psutil.Process, rds: psutil.Process) -> None:
        self.jvm = jvm
        self.rds = rds

    def snapshot(self) -> dict[str, float]:
        t = self.jvm.cpu_times()
        python = t.children_user + t.children_system
        for child in self.jvm.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "python" in child.name().lower():
                    python += _cpu(child, children=True)
        m = psutil.cpu_times()
        return {
            "python": python,
            "jvm": t.user + t.system,
            "redis": _cpu(self.rds, children=False),
            "bench": _cpu(psutil.Process(), children=False),
            "machine": m.user + m.nice + m.system + m.irq + m.softirq + m.steal,
        }


# -- results ---------------------------------------------------------------------------------


@dataclass
class ReadSample:
    rows: int
    seconds: float
    cpu_s: dict[str, float]  # CPU seconds per process group over the action

    @property
    def rate(self) -> float:
        return self.rows / self.seconds

    def us_per_row(self, who: str) -> float:
        return self.cpu_s[who] / self.rows * 1e6

    def pct(self, who: str) -> float:
        return 100 * self.cpu_s[who] / self.seconds


@dataclass
class RawSample:
    entries: int
    messages: int
    seconds: float
    client_cpu_s: float
    redis_cpu_s: float
    passes: int  # whole passes over its stream, fewest of the readers

    @property
    def entry_rate(self) -> float:
        return self.entries / self.seconds

    @property
    def message_rate(self) -> float:
        return self.messages / self.seconds


@dataclass
class ReadCase:
    key: str
    label: str
    per_entry: int
    entries: int = 0
    fill_seconds: float = 0.0
    spark: list[ReadSample] = field(default_factory=list)
    raw: list[RawSample] = field(default_factory=list)


# -- the bench -------------------------------------------------------------------------------


class SparkBench:
    def __init__(self, args: argparse.Namespace, env: BenchEnv) -> None:
        self.args = args
        self.env = env
        assert env.rds is not None and env.gw is not None
        self.rds: RedisServer = env.rds
        self.gw: GatewayProcess = env.gw
        self.http_url = f"http://127.0.0.1:{self.gw.http_port}"
        self.keys = KeySchema(KEY_PREFIX)
        self.run_id = secrets.token_hex(3)
        self.payload = os.urandom(PAYLOAD_SIZE)
        self.raw = redis.Redis(host="127.0.0.1", port=self.rds.port, protocol=2)
        self.spark: Any = None
        self.cpu: SparkCpu | None = None
        self.jvm: psutil.Process | None = None
        self._topics = 0

    # -- set-up --

    def start_spark(self) -> None:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        import pyspark_pulsar

        local_dir = self.env.workdir / "spark-local"
        local_dir.mkdir()
        self.spark = (
            SparkSession.builder.master(f"local[{PARTITIONS}]")
            .appName("pulsar-gateway-bench-spark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(PARTITIONS))
            .config("spark.local.dir", str(local_dir))
            .config("spark.driver.memory", "2g")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        pyspark_pulsar.register(self.spark)
        javas = [
            p for p in psutil.Process().children(recursive=True) if p.name().startswith("java")
        ]
        if len(javas) != 1:
            raise BenchError(f"expected one Spark JVM below this process, found {javas}")
        self.jvm = javas[0]
        self.cpu = SparkCpu(self.jvm, psutil.Process(self.rds.proc.pid))

    def close(self) -> None:
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()
        with contextlib.suppress(Exception):
            self.raw.close()

    # -- topics --

    def topic(self, label: str) -> str:
        self._topics += 1
        return f"persistent://{NAMESPACE}/bench-spark-{self.run_id}-{self._topics:02d}-{label}"

    def create_partitioned(self, topic: str, partitions: int) -> None:
        path = topic.replace("persistent://", "persistent/")
        request = urllib.request.Request(
            f"{self.http_url}/admin/v2/{path}/partitions",
            data=str(partitions).encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            if response.status not in (200, 204):
                raise BenchError(f"creating {topic}: HTTP {response.status}")

    def streams(self, topic: str) -> list[str]:
        return [self.keys.topic(f"{topic}-partition-{i}").stream for i in range(PARTITIONS)]

    def entries(self, topic: str) -> int:
        return sum(int(self.raw.xlen(k)) for k in self.streams(topic))

    def drop(self, topic: str) -> None:
        for i in range(PARTITIONS):
            base = self.keys.topic(f"{topic}-partition-{i}").stream[: -len(":stream")]
            pattern = base.replace("[", "\\[").replace("?", "\\?").replace("*", "\\*") + ":*"
            keys = list(self.raw.scan_iter(match=pattern, count=1000))
            if keys:
                self.raw.delete(*keys)

    # -- fill --

    def fill(self, topic: str, n: int, per_entry: int) -> float:
        t0 = time.perf_counter()
        if self.args.fill == "spark":
            from pyspark.sql import functions as F

            (
                self.spark.range(n, numPartitions=PARTITIONS)
                .select(F.lit(bytearray(self.payload)).alias("value"))
                .write.format("pulsar")
                .option("service.url", self.gw.url)
                .option("admin.url", self.http_url)
                .option("topic", topic)
                .option("pulsar.producer.batchingMaxMessages", str(per_entry))
                .mode("append")
                .save()
            )
        else:
            self._client_fill(topic, n, per_entry)
        return time.perf_counter() - t0

    def _client_fill(self, topic: str, n: int, per_entry: int) -> None:
        import pulsar

        client = pulsar.Client(
            self.gw.url,
            operation_timeout_seconds=30,
            logger=_client_logger(),
        )
        errors: list[str] = []
        acks = [0]
        lock = threading.Lock()
        done = threading.Event()

        def on_ack(result: Any, _msg_id: Any) -> None:
            with lock:
                acks[0] += 1
                if result != pulsar.Result.Ok:
                    errors.append(str(result))
                if acks[0] >= n:
                    done.set()

        try:
            producer = client.create_producer(
                topic,
                batching_enabled=per_entry > 1,
                batching_max_messages=max(2, per_entry),
                batching_max_publish_delay_ms=100,
                block_if_queue_full=True,
                max_pending_messages=10_000,
                send_timeout_millis=30_000,
            )
            for _ in range(n):
                producer.send_async(self.payload, on_ack)
            producer.flush()
            if not done.wait(60 + n / 1000):
                raise BenchError(f"fill: only {acks[0]} of {n} sends acknowledged")
            if errors:
                raise BenchError(f"fill: send errors {errors[:3]}")
            producer.close()
        finally:
            client.close()

    # -- batch reads --

    def load(self, topic: str) -> Any:
        return (
            self.spark.read.format("pulsar")
            .option("service.url", self.gw.url)
            .option("admin.url", self.http_url)
            .option("topic", topic)
            .load()
        )

    def spark_read(self, topic: str, rows: int) -> ReadSample:
        assert self.cpu is not None
        df = self.load(topic)
        c0 = self.cpu.snapshot()
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        t1 = time.perf_counter()
        c1 = self.cpu.snapshot()
        wall = t1 - t0
        used = {k: c1[k] - c0[k] for k in c0}
        used["other"] = max(0.0, used.pop("machine") - sum(used.values()))
        return ReadSample(rows, wall, used)

    def fixed_cost(self, runs: int) -> list[ReadSample]:
        """The same action on a topic of one message per partition, its wall time and CPU:
        what every read pays whatever its size (planning in Python planner workers, two
        tasks)."""
        topic = self.topic("tiny")
        self.create_partitioned(topic, PARTITIONS)
        self.fill(topic, PARTITIONS, 1)
        if self.load(topic).count() != PARTITIONS:
            raise BenchError("the tiny topic does not read back")
        out = []
        for _ in range(runs):
            out.append(self.spark_read(topic, PARTITIONS))
        self.drop(topic)
        return out

    def raw_read(self, topic: str, per_entry: int) -> RawSample:
        rds = psutil.Process(self.rds.proc.pid)
        streams = self.streams(topic)
        lengths = {key: int(self.raw.xlen(key)) for key in streams}
        r0 = _cpu(rds, children=False)
        reads, wall, client_cpu = raw_xrange(
            self.rds.port, streams, RAW_MIN_SECONDS, 60 + RAW_MIN_SECONDS + self.args.messages / 1e4
        )
        r1 = _cpu(rds, children=False)
        for key, (read, passes) in reads.items():
            if passes < 1 or read != passes * lengths[key]:
                raise BenchError(f"raw XRANGE read {read} entries of {key} in {passes} passes")
        entries = sum(read for read, _ in reads.values())
        passes = min(p for _, p in reads.values())
        return RawSample(entries, entries * per_entry, wall, client_cpu, r1 - r0, passes)

    def read_case(self, case: ReadCase) -> None:
        n = self.args.messages
        log = self.env.log
        topic = self.topic(case.key)
        self.create_partitioned(topic, PARTITIONS)
        with self.env.watchdog.phase(f"fill {case.key}", 180 + n / 2000):
            case.fill_seconds = self.fill(topic, n, case.per_entry)
        case.entries = self.entries(topic)
        log(
            f"{case.key}: filled {n:,} messages in {case.fill_seconds:.1f}s "
            f"({n / case.fill_seconds:,.0f} msg/s, --fill {self.args.fill}): "
            f"{case.entries:,} entries"
        )
        if case.entries != n // case.per_entry:
            raise BenchError(
                f"{case.key}: {case.entries} stream entries for {n} messages, expected "
                f"{n // case.per_entry} ({case.per_entry} per entry)"
            )
        limit = 120 + n / 5000
        with self.env.watchdog.phase(f"count {case.key}", limit):
            rows = self.load(topic).count()
        if rows != n:
            raise BenchError(f"{case.key}: Spark read {rows} rows, expected {n}")
        for p in range(self.args.passes):
            with self.env.watchdog.phase(f"spark read {case.key}", limit):
                s = self.spark_read(topic, n)
            case.spark.append(s)
            log(
                f"{case.key} pass {p + 1}: Spark {s.rate:,.0f} rows/s in {s.seconds:.2f}s "
                f"(python workers {s.us_per_row('python'):.1f} µs/row, "
                f"JVM {s.us_per_row('jvm'):.1f} µs/row, redis {s.us_per_row('redis'):.2f})"
            )
            with self.env.watchdog.phase(f"raw read {case.key}", limit):
                r = self.raw_read(topic, case.per_entry)
            case.raw.append(r)
            log(
                f"{case.key} pass {p + 1}: raw XRANGE {r.entry_rate:,.0f} entries/s "
                f"({r.message_rate:,.0f} msg/s) in {r.seconds:.2f}s ({r.passes} pass(es) "
                "over each stream)"
            )
        self.drop(topic)

    # -- streaming latency --

    def stream_latency(self) -> dict[str, Any]:
        import pulsar
        from pyspark.sql import functions as F

        assert self.cpu is not None
        args, log = self.args, self.env.log
        topic = self.topic("stream")
        self.create_partitioned(topic, PARTITIONS)
        latencies: list[float] = []
        batches: list[tuple[int, int]] = []  # (batch id, rows)
        lock = threading.Lock()

        def sink(batch_df: Any, batch_id: int) -> None:
            published = [
                row[0] for row in batch_df.select(F.unix_millis("__publishTime")).collect()
            ]
            now_ms = time.time() * 1000
            with lock:
                latencies.extend(now_ms - p for p in published)
                batches.append((batch_id, len(published)))

        query = (
            self.spark.readStream.format("pulsar")
            .option("service.url", self.gw.url)
            .option("admin.url", self.http_url)
            .option("topic", topic)
            .option("startingOffsets", "latest")
            .load()
            .writeStream.foreachBatch(sink)
            .trigger(processingTime=f"{TRIGGER_SECONDS:g} second")
            .option("checkpointLocation", str(self.env.workdir / "checkpoint"))
            .start()
        )
        client = pulsar.Client(
            self.gw.url,
            operation_timeout_seconds=30,
            logger=_client_logger(),
        )
        try:
            wait_until(lambda: query.lastProgress is not None, 120, "the query's first trigger")
            if query.exception() is not None:
                raise BenchError(f"streaming query failed: {query.exception()}")
            producer = client.create_producer(
                topic, batching_enabled=False, block_if_queue_full=True, send_timeout_millis=30_000
            )
            errors: list[str] = []

            def on_ack(result: Any, _msg_id: Any) -> None:
                if result != pulsar.Result.Ok:
                    errors.append(str(result))

            rate, seconds = args.stream_rate, args.stream_seconds
            total = int(rate * seconds)
            log(f"stream: sending {total:,} messages at {rate:,} msg/s for {seconds:g}s")
            c0 = self.cpu.snapshot()
            t0 = time.monotonic()
            sent = 0
            while sent < total:
                due = min(total, int((time.monotonic() - t0) * rate) + 1)
                while sent < due:
                    producer.send_async(self.payload, on_ack)
                    sent += 1
                time.sleep(0.001)
            producer.flush()
            send_seconds = time.monotonic() - t0
            wait_until(
                lambda: len(latencies) >= total or query.exception() is not None,
                30 + 5 * TRIGGER_SECONDS,
                f"the stream to deliver {total:,} rows (got {len(latencies):,})",
                interval=0.05,
            )
            wall = time.monotonic() - t0
            c1 = self.cpu.snapshot()
            if query.exception() is not None:
                raise BenchError(f"streaming query failed: {query.exception()}")
            time.sleep(TRIGGER_SECONDS * 1.5)  # nothing more should come
            if errors:
                raise BenchError(f"stream producer errors: {errors[:3]}")
            progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
            producer.close()
        finally:
            with contextlib.suppress(Exception):
                query.stop()
            client.close()
        with lock:
            lat = sorted(latencies)
            data_batches = [b for b in batches if b[1] > 0]
        if len(lat) != total:
            raise BenchError(f"stream: {len(lat)} rows received for {total} sent")
        durations = [p["durationMs"].get("triggerExecution", 0) for p in progress]
        used = {k: c1[k] - c0[k] for k in c0}
        self.drop(topic)
        return {
            "rate": rate,
            "seconds": seconds,
            "send_seconds": send_seconds,
            "sent": total,
            "received": len(lat),
            "batches": len(data_batches),
            "rows_per_batch": statistics.median(b[1] for b in data_batches),
            "p50_ms": _percentile(lat, 50),
            "p99_ms": _percentile(lat, 99),
            "max_ms": lat[-1],
            "min_ms": lat[0],
            "batch_ms_median": statistics.median(durations) if durations else None,
            "batch_ms_max": max(durations) if durations else None,
            "cpu_pct": {k: 100 * v / wall for k, v in used.items() if k != "machine"},
        }


def _client_logger() -> logging.Logger:
    """The official client's log, errors only, to stderr (stdout carries the report)."""
    logger = logging.getLogger("bench_spark.pulsar-client")
    logger.setLevel(logging.ERROR)
    return logger


def _ratio(value: float) -> str:
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def _net_us(samples: list[ReadSample], who: str, fixed_cpu: float) -> float:
    """Median CPU µs per row of ``who`` net of the fixed cost's CPU."""
    return median([(s.cpu_s[who] - fixed_cpu) / s.rows * 1e6 for s in samples])


def _percentile(sorted_values: list[float], pct: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--messages",
        "-n",
        type=int,
        default=None,
        help="messages per read case (default 1000000; 100000 with --quick); "
        f"a multiple of {BATCH_SIZE * PARTITIONS}",
    )
    p.add_argument("--quick", action="store_true", help="N=100000, 1 pass, 5 s stream")
    p.add_argument("--passes", type=int, default=None, help="passes per read case (default 3)")
    p.add_argument(
        "--stream-seconds",
        type=float,
        default=None,
        help="seconds the stream producer sends (default 20; 5 with --quick; 0 skips it)",
    )
    p.add_argument("--stream-rate", type=int, default=1000, help="stream messages/s")
    p.add_argument(
        "--fill",
        choices=("spark", "client"),
        default="spark",
        help="fill the read topics with the project's Spark writer (default) or the official "
        "client (batching off for one message per entry)",
    )
    p.add_argument("--json", metavar="PATH", default=None, help="also write results as JSON")
    args = p.parse_args(argv)
    if args.messages is None:
        args.messages = 100_000 if args.quick else 1_000_000
    if args.passes is None:
        args.passes = 1 if args.quick else 3
    if args.stream_seconds is None:
        args.stream_seconds = 5.0 if args.quick else 20.0
    if args.messages <= 0 or args.messages % (BATCH_SIZE * PARTITIONS):
        p.error(f"--messages must be a positive multiple of {BATCH_SIZE * PARTITIONS}")
    if args.passes <= 0 or args.stream_seconds < 0 or args.stream_rate <= 0:
        p.error("--passes and --stream-rate must be positive, --stream-seconds >= 0")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = BenchEnv("pgw-bench-spark-")
    log, watchdog = env.log, env.watchdog
    bench: SparkBench | None = None
    cases = [
        ReadCase("one-per-entry", "a. one message per entry", 1),
        ReadCase("batched-100", f"b. {BATCH_SIZE} messages per entry", BATCH_SIZE),
    ]
    stream: dict[str, Any] = {}
    versions: dict[str, str] = {}
    fixed: list[ReadSample] = []
    try:
        with watchdog.phase("start-up", 240):
            rds = env.rds = RedisServer(env.workdir, aof=False)
            log(f"redis-server {rds.version} on port {rds.port} (AOF off)")
            gw = env.gw = GatewayProcess(rds.url, env.workdir)
            watchdog.gateway = gw
            log(f"gateway pid {gw.pid} on {gw.url}")
            bench = SparkBench(args, env)
            bench.start_spark()
            versions["spark"] = bench.spark.version
            versions["java"] = str(bench.spark.sparkContext._jvm.System.getProperty("java.version"))
            log(f"Spark {bench.spark.version} local[{PARTITIONS}], JVM pid {bench.jvm.pid}")
        with watchdog.phase("fixed cost", 180):
            fixed = bench.fixed_cost(max(3, args.passes))
        log(
            "fixed cost of a read action: "
            + ", ".join(
                f"{x.seconds:.2f}s (python workers {x.cpu_s['python']:.2f}s CPU, "
                f"JVM {x.cpu_s['jvm']:.2f}s)"
                for x in fixed
            )
        )
        for case in cases:
            bench.read_case(case)
        if args.stream_seconds:
            with watchdog.phase("streaming", 180 + 3 * args.stream_seconds):
                stream = bench.stream_latency()
            log(
                f"stream: p50 {stream['p50_ms']:.0f} ms, p99 {stream['p99_ms']:.0f} ms, "
                f"max {stream['max_ms']:.0f} ms over {stream['received']:,} rows"
            )
        env.failed = False
    except KeyboardInterrupt:
        env.failed = False
        raise
    finally:
        watchdog.gateway = None
        with watchdog.phase("shutdown", 90):
            if bench is not None:
                bench.close()
            env.cleanup()
        watchdog.stop()
    runtime = time.monotonic() - env.started
    report(args, rds, versions, cases, fixed, stream, runtime)
    return {
        "args": vars(args),
        "redis_version": rds.version,
        "versions": versions,
        "read_cases": [
            {
                "key": c.key,
                "per_entry": c.per_entry,
                "entries": c.entries,
                "fill_seconds": c.fill_seconds,
                "spark": [
                    {"rows": s.rows, "seconds": s.seconds, "cpu_seconds": s.cpu_s} for s in c.spark
                ],
                "raw": [r.__dict__ for r in c.raw],
            }
            for c in cases
        ],
        "fixed_cost": [{"seconds": x.seconds, "cpu_seconds": x.cpu_s} for x in fixed],
        "stream": stream,
        "runtime_seconds": runtime,
    }


def report(
    args: argparse.Namespace,
    rds: RedisServer,
    versions: dict[str, str],
    cases: list[ReadCase],
    fixed: list[ReadSample],
    stream: dict[str, Any],
    runtime: float,
) -> None:
    import pulsar
    import pyarrow

    out: list[str] = []
    cmd = shlex.join([sys.executable, *sys.argv])
    passes = f"{args.passes} pass(es){' (medians)' if args.passes > 1 else ''}"
    out += [
        "# pulsar-redis-gateway Spark data source bench",
        "",
        f"- command: `{cmd}`",
        f'- Redis {rds.version}, AOF off (`--save ""`); gateway {git_describe()}',
        f"- Spark {versions.get('spark', '?')} local[{PARTITIONS}] (Java "
        f"{versions.get('java', '?')}), pyarrow {pyarrow.__version__}; "
        f"redis-py {redis.__version__} (hiredis "
        f"{'yes' if redis.utils.HIREDIS_AVAILABLE else 'no'}); pulsar-client "
        f"{pulsar.__version__}; Python {platform.python_version()}; {os.cpu_count()} CPUs",
        f"- N = {args.messages:,} messages per read case, {PAYLOAD_SIZE}-byte payloads, topics "
        f"of {PARTITIONS} partitions filled with --fill {args.fill}, {passes}",
        "",
        '## Batch read: `spark.read.format("pulsar").load()` + `write.format("noop")`',
        "",
        "| case | stream entries | Spark rows/s | raw XRANGE entries/s | raw msg/s | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        g = median([s.rate for s in c.spark])
        raw_e = median([r.entry_rate for r in c.raw])
        rm = median([r.message_rate for r in c.raw])
        note = "" if c.per_entry == 1 else f" ({c.per_entry}/entry, still packed)"
        out.append(
            f"| {c.label} | {c.entries:,} | {fmt_rate(g)} | {fmt_rate(raw_e)} | "
            f"{fmt_rate(rm)}{note} | {_ratio(g / rm)} |"
        )
    fixed_s = median([x.seconds for x in fixed])
    fixed_cpu = {who: median([x.cpu_s[who] for x in fixed]) for who in ("python", "jvm")}
    net = []
    for c in cases:
        spent = median([s.seconds for s in c.spark]) - fixed_s
        net.append(f"{c.key} {fmt_rate(args.messages / spent) if spent > 0 else 'n/a'}")
    out += [
        "",
        f"Raw: redis-py `XRANGE COUNT {XRANGE_COUNT}` loop, one spawned process per partition "
        f"stream ({PARTITIONS} in parallel), re-reading its stream until at least "
        f"{RAW_MIN_SECONDS:g} s have passed; ratio = Spark rows/s / raw msg/s. The same "
        f"action on a topic of {PARTITIONS} messages takes {fixed_s:.2f} s (median of "
        f"{len(fixed)}), which every read pays whatever its size; net of it, Spark rows/s: "
        + ", ".join(net)
        + f". That action costs the Python workers {fixed_cpu['python'] * 1000:.0f} ms of CPU "
        f"and the JVM {fixed_cpu['jvm'] * 1000:.0f} ms (medians); net of it, µs per row: "
        + ", ".join(
            f"{c.key} Python workers "
            f"{_net_us(c.spark, 'python', fixed_cpu['python']):.1f}, JVM "
            f"{_net_us(c.spark, 'jvm', fixed_cpu['jvm']):.1f}"
            for c in cases
        )
        + ".",
        "",
        "CPU during the action (µs per row, medians; % of one core over the wall time):",
        "",
        "| case | seconds | Python workers µs/row | JVM µs/row | Redis µs/row | "
        "Python workers | JVM | Redis | bench process | other | fill msg/s | passes rows/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in cases:

        def m(fn: Any, samples: list[ReadSample] = c.spark) -> float:
            return median([fn(s) for s in samples])

        out.append(
            f"| {c.key} (Spark) | {m(lambda s: s.seconds):.2f} "
            f"| {m(lambda s: s.us_per_row('python')):.1f} "
            f"| {m(lambda s: s.us_per_row('jvm')):.1f} "
            f"| {m(lambda s: s.us_per_row('redis')):.2f} "
            f"| {m(lambda s: s.pct('python')):.0f}% | {m(lambda s: s.pct('jvm')):.0f}% "
            f"| {m(lambda s: s.pct('redis')):.0f}% | {m(lambda s: s.pct('bench')):.0f}% "
            f"| {m(lambda s: s.pct('other')):.0f}% "
            f"| {args.messages / c.fill_seconds:,.0f} "
            f"| {', '.join(fmt_rate(s.rate) for s in c.spark)} |"
        )
        raw_client = median([r.client_cpu_s / r.entries * 1e6 for r in c.raw])
        raw_redis = median([r.redis_cpu_s / r.entries * 1e6 for r in c.raw])
        raw_pct = median([100 * r.client_cpu_s / r.seconds for r in c.raw])
        raw_rpct = median([100 * r.redis_cpu_s / r.seconds for r in c.raw])
        out.append(
            f"| {c.key} (raw, per entry) | {median([r.seconds for r in c.raw]):.2f} "
            f"| {raw_client:.1f} (redis-py readers) | | {raw_redis:.2f} "
            f"| {raw_pct:.0f}% (readers) | | {raw_rpct:.0f}% | | | "
            f"| {', '.join(fmt_rate(r.entry_rate) for r in c.raw)} entries/s |"
        )

    if stream:
        trig = TRIGGER_SECONDS * 1000
        b = stream["batch_ms_median"]
        theory = "n/a"
        if b is not None:
            worst = trig + stream["batch_ms_max"]
            theory = f"{trig / 2 + b:.0f} / {trig * 0.99 + b:.0f} / {worst:.0f}"
        cpu = stream["cpu_pct"]
        out += [
            "",
            "## Streaming end-to-end latency: `readStream` + `foreachBatch`, trigger "
            f"processingTime {TRIGGER_SECONDS:g} s",
            "",
            "| rate msg/s | seconds | rows sent / received | micro-batches | rows/batch "
            "| p50 ms | p99 ms | max ms | batch duration ms (median / max) "
            "| trigger alone + batch: p50 / p99 / max ms |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {stream['rate']:,} | {stream['seconds']:g} "
            f"| {stream['sent']:,} / {stream['received']:,} | {stream['batches']} "
            f"| {stream['rows_per_batch']:,.0f} | {stream['p50_ms']:.0f} "
            f"| {stream['p99_ms']:.0f} | {stream['max_ms']:.0f} "
            f"| {b if b is not None else 'n/a'} / {stream['batch_ms_max']} | {theory} |",
            "",
            f"Latency = driver time after `collect()` in `foreachBatch` - `__publishTime` (set by "
            f"the producing client; min {stream['min_ms']:.0f} ms). A message waits for the next "
            f"trigger (uniform 0-{trig:.0f} ms) and then for its micro-batch to run. CPU while "
            f"streaming: Python workers {cpu['python']:.0f}%, JVM {cpu['jvm']:.0f}%, Redis "
            f"{cpu['redis']:.0f}%, bench process (producer, foreachBatch) {cpu['bench']:.0f}%.",
        ]
    out += [
        "",
        f"- load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"- runtime: {runtime:.1f}s",
    ]
    print("\n".join(out), flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_cli(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
