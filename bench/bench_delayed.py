"""Delayed delivery benchmark: scheduled messages on the gateway against raw Redis.

Usage::

    .venv/bin/python bench/bench_delayed.py [--scheduled N] [--quick] [--late M]
                                            [--promote M2] [--consumers K] [--json PATH]

One run starts its own redis-server (temp dir, free port, no RDB snapshots, AOF off) and one
gateway subprocess on it (helpers shared with ``bench/harness.py``), then, on one topic with a
Shared subscription whose consumer(s) stay connected from the start (so the gateway indexes
scheduled messages as they arrive), with 100-byte payloads sent one message per entry (the
client never batches a message with a delivery time):

1. seed: N scheduled messages (default 1,000,000; 100,000 with ``--quick``) due 1-2 hours
   ahead, sent with the official client (``send_async(deliver_at=...)`` + ``flush()``);
   timed to the last send receipt and until the subscription's index (zset
   ``pgw:{<topic>}:delayed:<sub>``) holds all N. Redis ``used_memory`` before and after,
   divided by N, is the memory per scheduled message (stream entry + pending entry + index).
2. lateness: with the N still outstanding, M messages (default 20,000) due at random times
   spread uniformly over a window (default 10 s starting 3 s after sending starts); each
   payload carries its deliver-at time, the consumer notes receive time minus deliver-at:
   p50 / p99 / max, and the count received early (must be 0).
3. promotion: M2 messages (default 50,000) all due at the same millisecond, sent and indexed
   before then; rate = M2 / (time of the last receive - due time).

Raw Redis in the same run, after the gateway cases, on its own keys, with entries copied
field for field from one of the gateway's stream entries: pipelined ``XADD`` of N entries,
``XREADGROUP`` of all to one consumer (the pending-entry list the gateway keeps its scheduled
messages in), ``ZADD`` of N members (the stream ids) scored by deliver-at, 1000 per command;
memory deltas per message of each. Then M2 more members at one score and a loop of
``ZRANGEBYSCORE -inf <due> LIMIT 0 250`` + ``ZREM`` of those until none is left (the sorted
set work of a promotion), and the same loop also moving the entries as the gateway does
(``XCLAIM`` to a reader, returning the entries, and ``XACK``). Raw Redis has no notion of
lateness, so only throughput and memory get ratios.

Where the time goes: CPU (100% = one core) of the gateway, redis-server and this process
(the official client) during each timed section, and Redis's own ``INFO commandstats``
(calls and µs per call of the busiest commands, ``EVALSHA`` being the gateway's scripts).

Robustness: every wait has a timeout; the watchdog of ``bench/harness.py`` ends the run (gateway
SIGTERM, redis-server stop, temp dir removal) when a phase overruns or the gateway dies.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil
import pulsar
import redis

from harness import (
    KEY_PREFIX,
    MIB,
    NAMESPACE,
    PAYLOAD_SIZE,
    BenchEnv,
    BenchError,
    CpuMeter,
    GatewayProcess,
    RedisServer,
    fmt_rate,
    git_describe,
    run_cli,
    wait_until,
)
from pulsar_gateway.core.storage.keys import DELAYED_CONSUMER, hash_tag

SUBSCRIPTION = "bench-delayed"
RAW_BATCH = 1000  # raw commands per pipeline execute(), members per ZADD, XREADGROUP COUNT
RAW_PROMOTE_LIMIT = 250  # ZRANGEBYSCORE LIMIT of the raw promotion loop
FAR_MS = 3_600_000  # seed messages are due 1-2 hours ahead
SLOWLOG_US = 1000  # Redis commands this long or longer are noted per section


def now_ms() -> float:
    return time.time() * 1000.0


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(-(-q * len(sorted_values) // 100)))  # ceil(q/100 * n)
    return sorted_values[min(rank, len(sorted_values)) - 1]


def payload(tag: bytes, at: int) -> bytes:
    """A PAYLOAD_SIZE-byte payload naming its phase and deliver-at time."""
    return (tag + str(at).encode() + b":").ljust(PAYLOAD_SIZE, b".")


@dataclass
class Timed:
    """CPU and Redis command statistics of one timed section."""

    seconds: float
    cpu: dict[str, float]
    commands: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: longest single Redis command (a script counts as one: Redis serves nothing else
    #: meanwhile), its name, and how many took SLOWLOG_US or more
    longest_ms: float = 0.0
    longest: str = ""
    slow: int = 0


class Receipts:
    """send_async callback: counts receipts and errors, notes when the last one came."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.errors: dict[str, int] = {}
        self.last = 0.0  # perf_counter
        self.last_ms = 0.0  # wall clock
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, result: Any, _msg_id: Any) -> None:
        with self._lock:
            self.count += 1
            if result != pulsar.Result.Ok:
                self.errors[str(result)] = self.errors.get(str(result), 0) + 1
            if self.count >= self.expected:
                self.last = time.perf_counter()
                self.last_ms = now_ms()
                self.done.set()


class Receiver:
    """One Shared consumer and a thread that receives and acknowledges everything,
    noting (receive wall-clock ms, first bytes of the payload) for each message."""

    def __init__(self, consumer: Any, name: str) -> None:
        self.consumer = consumer
        self.seen: list[tuple[float, bytes]] = []
        self.counts: dict[bytes, int] = {}
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        receive, ack, seen = self.consumer.receive, self.consumer.acknowledge, self.seen
        while not self._stop.is_set():
            try:
                msg = receive(200)
            except pulsar.Timeout:
                continue
            except BaseException as exc:  # a closed consumer or client: report, stop
                if not self._stop.is_set():
                    self.errors.append(exc)
                return
            head = msg.data()[:24]
            seen.append((now_ms(), head))
            ack(msg)
            self.counts[head[:1]] = self.counts.get(head[:1], 0) + 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class DelayedBench:
    def __init__(self, args: argparse.Namespace, rds: RedisServer, gw: GatewayProcess) -> None:
        self.args = args
        self.rds = rds
        self.gw = gw
        self.rng = random.Random(args.seed)
        run_id = secrets.token_hex(3)
        self.topic = f"persistent://{NAMESPACE}/bench-delayed-{run_id}"
        base = f"{KEY_PREFIX}:{hash_tag(self.topic)}"
        self.stream_key = f"{base}:stream"
        self.delayed_key = f"{base}:delayed:{SUBSCRIPTION}"
        self.raw_stream = f"rawbench:{{{run_id}}}:stream"
        self.raw_delayed = f"rawbench:{{{run_id}}}:delayed"
        self.client = pulsar.Client(
            gw.url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.raw = redis.Redis(host="127.0.0.1", port=rds.port, protocol=2)
        self.cpu = CpuMeter(
            {"gateway": gw.ps, "redis": psutil.Process(rds.proc.pid), "client": psutil.Process()}
        )
        self.receivers: list[Receiver] = []
        self.producer: Any = None
        self.seed_rate = 0.0

    def close(self) -> None:
        for r in self.receivers:
            r.stop()
        with contextlib.suppress(Exception):
            self.client.close()
        with contextlib.suppress(Exception):
            self.raw.close()

    # -- measuring helpers --

    def used_memory(self) -> int:
        return int(self.raw.info("memory")["used_memory"])

    def commandstats(self) -> dict[str, tuple[int, int]]:
        out = {}
        for name, v in self.raw.info("commandstats").items():
            out[name.removeprefix("cmdstat_")] = (int(v["calls"]), int(v["usec"]))
        return out

    @contextlib.contextmanager
    def timed(self, into: dict[str, Timed], key: str) -> Iterator[None]:
        self.raw.slowlog_reset()
        s0, c0, t0 = self.commandstats(), self.cpu.snapshot(), time.perf_counter()
        yield
        t1, c1, s1 = time.perf_counter(), self.cpu.snapshot(), self.commandstats()
        slow = self.raw.slowlog_get(100_000)
        self.raw.slowlog_reset()  # its entries would count in the memory figures
        busiest = sorted(
            ((n, s1[n][0] - s0.get(n, (0, 0))[0], s1[n][1] - s0.get(n, (0, 0))[1]) for n in s1),
            key=lambda x: -x[2],
        )
        commands = {n: (calls, usec / 1e6) for n, calls, usec in busiest if calls}
        timed = into[key] = Timed(t1 - t0, CpuMeter.percent(c0, c1, t1 - t0), commands)
        timed.slow = len(slow)
        if slow:
            worst = max(slow, key=lambda e: int(e["duration"]))
            timed.longest_ms = int(worst["duration"]) / 1000
            command = worst["command"]
            timed.longest = (
                command.decode(errors="replace") if isinstance(command, bytes) else str(command)
            ).split(" ", 1)[0]

    def check_receivers(self) -> None:
        for r in self.receivers:
            if r.errors:
                raise BenchError(f"a consumer failed: {r.errors[0]!r}")
        self.gw.check_alive()

    def received(self, tag: bytes) -> list[tuple[float, int]]:
        """(receive ms, deliver-at ms) of every message received with payload tag ``tag``."""
        out = []
        for r in self.receivers:
            for t, head in list(r.seen):
                if head[:1] == tag:
                    out.append((t, int(head[1:].split(b":", 1)[0])))
        return out

    def count_received(self, tag: bytes) -> int:
        return sum(r.counts.get(tag, 0) for r in self.receivers)

    def indexed(self) -> int:
        return int(self.raw.zcard(self.delayed_key))

    # -- gateway --

    def connect(self) -> None:
        for i in range(self.args.consumers):
            consumer = self.client.subscribe(
                self.topic,
                SUBSCRIPTION,
                consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Earliest,
                consumer_name=f"bench-{i}",
            )
            self.receivers.append(Receiver(consumer, f"receiver-{i}"))
        self.producer = self.client.create_producer(
            self.topic,
            batching_enabled=False,
            block_if_queue_full=True,
            max_pending_messages=self.args.max_pending,
            send_timeout_millis=60_000,
        )

    def send(self, messages: list[tuple[bytes, int]], timeout: float) -> Receipts:
        receipts = Receipts(len(messages))
        send = self.producer.send_async
        for data, at in messages:
            send(data, receipts, deliver_at=at)
        self.producer.flush()
        if not receipts.done.wait(timeout):
            raise BenchError(f"only {receipts.count} of {len(messages)} sends acknowledged")
        if receipts.errors:
            raise BenchError(f"send errors: {receipts.errors}")
        return receipts

    def seed(self, timed: dict[str, Timed]) -> dict[str, Any]:
        n = self.args.scheduled
        base = int(now_ms()) + FAR_MS
        messages = []
        for _ in range(n):
            at = base + self.rng.randrange(FAR_MS)
            messages.append((payload(b"F", at), at))
        limit = 120 + n / 1000
        mem0, rss0 = self.used_memory(), self.gw.rss()
        with self.timed(timed, "seed"):
            t0 = time.perf_counter()
            receipts = self.send(messages, limit)
            wait_until(lambda: self.indexed() >= n, limit, f"the index to hold {n:,}", 0.01)
            t1 = time.perf_counter()
        time.sleep(0.5)  # let the last acks and dispatches settle before reading memory
        mem1, rss1 = self.used_memory(), self.gw.rss()
        self.check_receivers()
        self.seed_rate = n / (receipts.last - t0)
        return {
            "sent_rate": self.seed_rate,
            "sent_seconds": receipts.last - t0,
            "indexed_rate": n / (t1 - t0),
            "indexed_seconds": t1 - t0,
            "index_lag_seconds": t1 - receipts.last,
            "used_memory_before": mem0,
            "used_memory_after": mem1,
            "bytes_per_message": (mem1 - mem0) / n,
            "index_key_bytes": self.memory_usage(self.delayed_key) / n,
            "gateway_rss_before": rss0,
            "gateway_rss_after": rss1,
            "index_size": self.indexed(),
        }

    def memory_usage(self, key: str) -> int:
        return int(self.raw.memory_usage(key, samples=0) or 0)

    def lateness(self, timed: dict[str, Timed]) -> dict[str, Any]:
        m, lead, window = self.args.late, int(self.args.lead * 1000), self.args.window * 1000
        start = int(now_ms())
        ats = [start + lead + int(self.rng.random() * window) for _ in range(m)]
        limit = 60 + lead / 1000 + window / 1000 + m / 1000
        with self.timed(timed, "lateness"):
            receipts = self.send([(payload(b"L", at), at) for at in ats], limit)
            stored_late = sum(1 for at in ats if at < receipts.last_ms)
            wait_until(
                lambda: self.count_received(b"L") >= m,
                limit,
                f"{m:,} lateness messages to be received",
                0.05,
            )
        self.check_receivers()
        got = self.received(b"L")
        late = sorted(t - at for t, at in got)
        return {
            "messages": m,
            "received": len(got),
            "p50_ms": percentile(late, 50),
            "p99_ms": percentile(late, 99),
            "max_ms": late[-1],
            "min_ms": late[0],
            "early": sum(1 for x in late if x < 0),
            "send_seconds": receipts.last_ms / 1000 - start / 1000,
            "due_before_stored": stored_late,
        }

    def promotion(self, timed: dict[str, Timed]) -> dict[str, Any]:
        m2, n = self.args.promote, self.args.scheduled
        # Due once every message is sent and indexed: the seed's send rate tells how long
        # that takes at this size, with a margin.
        lead = 3.0 + 2.0 * m2 / max(self.seed_rate, 1000.0)
        due = int(now_ms() + lead * 1000)
        self.send([(payload(b"P", due), due)] * m2, 60 + lead + m2 / 1000)
        wait_until(
            lambda: self.indexed() >= n + m2 or now_ms() >= due,
            lead + 60,
            "the promotion messages to be indexed",
            0.01,
        )
        indexed_before_due = self.indexed() >= n + m2 and now_ms() < due
        time.sleep(max(0.0, (due - now_ms()) / 1000))
        with self.timed(timed, "promotion"):
            wait_until(
                lambda: self.count_received(b"P") >= m2,
                60 + m2 / 500,
                f"{m2:,} promoted messages to be received",
                0.005,
            )
        self.check_receivers()
        got = self.received(b"P")
        times = sorted(t for t, _ in got)
        seconds = (times[-1] - due) / 1000
        return {
            "messages": m2,
            "received": len(got),
            "rate": m2 / seconds,
            "seconds": seconds,
            "first_ms": times[0] - due,
            "p50_ms": percentile(times, 50) - due,
            "early": sum(1 for t in times if t < due),
            "indexed_before_due": indexed_before_due,
            "lead_seconds": lead,
        }

    def far_received(self) -> int:
        return self.count_received(b"F")

    # -- raw Redis --

    def sample_entry(self) -> list[Any]:
        """The fields of one of the gateway's scheduled entries, to copy into raw entries."""
        entries = self.raw.xrange(self.stream_key, count=1)
        if not entries:
            raise BenchError("the gateway's stream is empty")
        fields: list[Any] = []
        for name, value in entries[0][1].items():
            fields += [name, value]
        return fields

    def raw_xadd(self, n: int, fields: list[Any]) -> list[bytes]:
        ids: list[bytes] = []
        pipe = self.raw.pipeline(transaction=False)
        for start in range(0, n, RAW_BATCH):
            for _ in range(min(RAW_BATCH, n - start)):
                pipe.execute_command("XADD", self.raw_stream, "*", *fields)
            ids += pipe.execute()
        return ids

    def raw_read_all(self, consumer: bytes) -> int:
        got = 0
        while True:
            reply = self.raw.xreadgroup(
                SUBSCRIPTION, consumer, {self.raw_stream: ">"}, count=RAW_BATCH
            )
            if not reply or not reply[0][1]:
                return got
            got += len(reply[0][1])

    def raw_zadd(self, members: list[tuple[bytes, int]]) -> None:
        pipe = self.raw.pipeline(transaction=False)
        for start in range(0, len(members), RAW_BATCH):
            chunk = members[start : start + RAW_BATCH]
            pipe.zadd(self.raw_delayed, {m: at for m, at in chunk})
            if len(pipe) >= 10:
                pipe.execute()
        pipe.execute()

    def raw_seed(self) -> dict[str, Any]:
        n = self.args.scheduled
        fields = self.sample_entry()
        base = int(now_ms()) + FAR_MS
        ats = [base + self.rng.randrange(FAR_MS) for _ in range(n)]
        m0 = self.used_memory()
        t0 = time.perf_counter()
        ids = self.raw_xadd(n, fields)
        t1 = time.perf_counter()
        m1 = self.used_memory()
        self.raw.xgroup_create(self.raw_stream, SUBSCRIPTION, id="0")
        t2 = time.perf_counter()
        if self.raw_read_all(DELAYED_CONSUMER) != n:
            raise BenchError("raw XREADGROUP did not read every entry")
        t3 = time.perf_counter()
        m2 = self.used_memory()
        self.raw_zadd(list(zip(ids, ats, strict=True)))
        t4 = time.perf_counter()
        m3 = self.used_memory()
        if self.raw.zcard(self.raw_delayed) != n:
            raise BenchError("raw ZADD: size mismatch")
        return {
            "entry_bytes": sum(len(f) if isinstance(f, bytes) else len(str(f)) for f in fields),
            "xadd_rate": n / (t1 - t0),
            "xreadgroup_rate": n / (t3 - t2),
            "zadd_rate": n / (t4 - t3),
            "all_rate": n / ((t1 - t0) + (t3 - t2) + (t4 - t3)),
            "stream_bytes": (m1 - m0) / n,
            "pel_bytes": (m2 - m1) / n,
            "zset_bytes": (m3 - m2) / n,
            "total_bytes": (m3 - m0) / n,
        }

    def raw_promote_once(self, m2: int, fields: list[Any], move: bool) -> float:
        """Add m2 members due at one score (their entries pending at the delayed consumer),
        then time the loop that promotes them; returns members per second."""
        ids = self.raw_xadd(m2, fields)
        if self.raw_read_all(DELAYED_CONSUMER) != m2:
            raise BenchError("raw XREADGROUP did not read the promotion entries")
        due = int(now_ms())
        self.raw_zadd([(i, due) for i in ids])
        r, key, zkey = self.raw, self.raw_stream, self.raw_delayed
        pipe = r.pipeline(transaction=False)
        done = 0
        t0 = time.perf_counter()
        while True:
            batch = r.zrangebyscore(zkey, "-inf", due, start=0, num=RAW_PROMOTE_LIMIT)
            if not batch:
                break
            pipe.zrem(zkey, *batch)
            if move:
                pipe.xclaim(key, SUBSCRIPTION, "reader", 0, batch)
                pipe.xack(key, SUBSCRIPTION, *batch)
            results = pipe.execute()
            if move and len(results[1]) != len(batch):
                raise BenchError("raw XCLAIM returned fewer entries than asked")
            done += len(batch)
        t1 = time.perf_counter()
        if done != m2:
            raise BenchError(f"raw promotion moved {done} of {m2}")
        if not move:
            r.xack(key, SUBSCRIPTION, *ids)
        return m2 / (t1 - t0)

    def raw_promotion(self) -> dict[str, Any]:
        fields = self.sample_entry()
        m2 = self.args.promote
        return {
            "zset_rate": self.raw_promote_once(m2, fields, move=False),
            "move_rate": self.raw_promote_once(m2, fields, move=True),
        }

    def raw_drop(self) -> None:
        self.raw.delete(self.raw_stream, self.raw_delayed)


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scheduled",
        "-n",
        type=int,
        default=None,
        help="far-future messages outstanding (default 1000000; 100000 with --quick)",
    )
    p.add_argument("--quick", action="store_true", help="smaller run: 100000 outstanding")
    p.add_argument("--late", type=int, default=20_000, help="lateness messages (default 20000)")
    p.add_argument(
        "--window", type=float, default=10.0, help="seconds the lateness messages are due over"
    )
    p.add_argument(
        "--lead", type=float, default=3.0, help="seconds from sending to the window's start"
    )
    p.add_argument(
        "--promote", type=int, default=50_000, help="messages due at one instant (default 50000)"
    )
    p.add_argument("--consumers", type=int, default=1, help="Shared consumers (default 1)")
    p.add_argument("--max-pending", type=int, default=10_000, help="producer max_pending_messages")
    p.add_argument("--seed", type=int, default=1, help="random seed of the deliver-at times")
    p.add_argument("--no-raw", action="store_true", help="skip the raw Redis comparison")
    p.add_argument("--json", metavar="PATH", default=None, help="also write results as JSON")
    args = p.parse_args(argv)
    if args.scheduled is None:
        args.scheduled = 100_000 if args.quick else 1_000_000
    if min(args.scheduled, args.late, args.promote, args.consumers) <= 0:
        p.error("--scheduled, --late, --promote and --consumers must be positive")
    if args.window <= 0 or args.lead <= 0:
        p.error("--window and --lead must be positive")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = BenchEnv("pgw-bench-delayed-")
    log, cleanup, watchdog = env.log, env.cleanup, env.watchdog
    bench: DelayedBench | None = None
    data: dict[str, Any] = {"args": vars(args)}
    timed: dict[str, Timed] = {}

    n = args.scheduled
    try:
        with watchdog.phase("start-up", 120):
            rds = env.rds = RedisServer(env.workdir, aof=False)
            log(f"redis-server {rds.version} on port {rds.port} (AOF off)")
            gw = env.gw = GatewayProcess(rds.url, env.workdir)
            watchdog.gateway = gw
            log(f"gateway pid {gw.pid} on {gw.url}")
            bench = DelayedBench(args, rds, gw)
            data["redis_version"] = rds.version
            rds.client.config_set("slowlog-log-slower-than", SLOWLOG_US)
            rds.client.config_set("slowlog-max-len", 100_000)
            bench.connect()

        with watchdog.phase("seed", 2 * (120 + n / 1000) + 60):
            log(f"seed: {n:,} messages due 1-2 hours ahead")
            seed = data["seed"] = bench.seed(timed)
            log(
                f"seed: sent at {seed['sent_rate']:,.0f} msg/s, indexed at "
                f"{seed['indexed_rate']:,.0f} msg/s; {seed['bytes_per_message']:.0f} B/message"
            )

        with watchdog.phase("lateness", 2 * (60 + args.lead + args.window + args.late / 1000)):
            log(f"lateness: {args.late:,} messages due over {args.window:g}s")
            late = data["lateness"] = bench.lateness(timed)
            log(
                f"lateness: p50 {late['p50_ms']:.1f} ms, p99 {late['p99_ms']:.1f} ms, "
                f"max {late['max_ms']:.1f} ms, early {late['early']}"
            )

        with watchdog.phase("promotion", 2 * (120 + args.promote / 200)):
            log(f"promotion: {args.promote:,} messages due at one instant")
            promo = data["promotion"] = bench.promotion(timed)
            log(f"promotion: {promo['rate']:,.0f} msg/s over {promo['seconds']:.2f}s")

        data["far_received"] = bench.far_received()
        data["index_after"] = bench.indexed()

        if not args.no_raw:
            with watchdog.phase("raw Redis", 2 * (120 + (n + 2 * args.promote) / 2000)):
                log("raw Redis: XADD, XREADGROUP, ZADD, promotion loops")
                data["raw_seed"] = bench.raw_seed()
                data["raw_promotion"] = bench.raw_promotion()
                bench.raw_drop()
        env.failed = False
    except KeyboardInterrupt:
        env.failed = False
        raise
    finally:
        watchdog.gateway = None
        with watchdog.phase("shutdown", 90):
            if bench is not None:
                bench.close()
            cleanup()
        watchdog.stop()

    data["timed"] = {k: v.__dict__ for k, v in timed.items()}
    data["runtime_seconds"] = time.monotonic() - env.started
    report(args, data, timed)
    return data


def _ratio(gateway: float, raw: float | None) -> str:
    return "n/a" if not raw else f"{gateway / raw:.2f}"


def report(args: argparse.Namespace, data: dict[str, Any], timed: dict[str, Timed]) -> None:
    n = args.scheduled
    seed, late, promo = data["seed"], data["lateness"], data["promotion"]
    raw: dict[str, Any] = data.get("raw_seed", {})
    rawp: dict[str, Any] = data.get("raw_promotion", {})
    out = [
        "# pulsar-redis-gateway delayed delivery bench",
        "",
        f"- command: `{shlex.join([sys.executable, *sys.argv])}`",
        f'- Redis {data["redis_version"]}, AOF off (`--save ""`); gateway {git_describe()}',
        f"- {n:,} scheduled messages outstanding (due 1-2 h ahead), {PAYLOAD_SIZE}-byte "
        f"payloads, one message per entry; {args.consumers} Shared consumer(s), receiver "
        f"queue 1000, acking each",
        f"- client: pulsar-client {pulsar.__version__}, redis-py {redis.__version__}; "
        f"Python {platform.python_version()}; {os.cpu_count()} CPUs",
        "",
        "| case | gateway | raw Redis | ratio |",
        "|---|---:|---:|---:|",
    ]
    out.append(
        f"| seed: send {n:,} scheduled messages, msg/s (to the last receipt) "
        f"| {fmt_rate(seed['sent_rate'])} | {fmt_rate(raw.get('xadd_rate'))} "
        f"(pipelined XADD) | {_ratio(seed['sent_rate'], raw.get('xadd_rate'))} |"
    )
    out.append(
        f"| seed: until all {n:,} are indexed, msg/s "
        f"| {fmt_rate(seed['indexed_rate'])} | {fmt_rate(raw.get('all_rate'))} "
        f"(XADD + XREADGROUP + ZADD) | {_ratio(seed['indexed_rate'], raw.get('all_rate'))} |"
    )
    out.append(
        f"| promotion: {args.promote:,} due at one instant, msg/s (due -> last received) "
        f"| {fmt_rate(promo['rate'])} | {fmt_rate(rawp.get('zset_rate'))} "
        f"(ZRANGEBYSCORE LIMIT {RAW_PROMOTE_LIMIT} + ZREM) "
        f"| {_ratio(promo['rate'], rawp.get('zset_rate'))} |"
    )
    out.append(
        f"| promotion, raw also moving the entries "
        f"| {fmt_rate(promo['rate'])} | {fmt_rate(rawp.get('move_rate'))} "
        f"(+ XCLAIM to a reader + XACK) | {_ratio(promo['rate'], rawp.get('move_rate'))} |"
    )
    per_msg = seed["bytes_per_message"]
    raw_total = raw.get("total_bytes")
    raw_mem = "n/a" if raw_total is None else f"{raw_total:.0f}"
    out.append(
        f"| Redis memory per scheduled message, bytes (ratio: gateway / raw) "
        f"| {per_msg:.0f} | {raw_mem} (stream + PEL + zset) | {_ratio(per_msg, raw_total)} |"
    )
    if raw:
        stream_only = raw["stream_bytes"]
        out += [
            "",
            "Redis memory per scheduled message (used_memory delta / N, bytes):",
            "",
            "| what | bytes |",
            "|---|---:|",
            f"| gateway: stream entry + pending entry + index | {per_msg:.0f} |",
            f"| raw: stream entry (XADD of the same fields) | {stream_only:.0f} |",
            f"| raw: + pending entry (XREADGROUP) | {raw['pel_bytes']:.0f} |",
            f"| raw: + zset member (ZADD) | {raw['zset_bytes']:.0f} |",
            f"| raw: total | {raw['total_bytes']:.0f} |",
            f"| what scheduling adds on the gateway (gateway - raw stream entry) "
            f"| {per_msg - stream_only:.0f} |",
        ]
    out += [
        "",
        f"Lateness (receive time - deliver-at) of {late['messages']:,} messages due over "
        f"{args.window:g} s, with {n:,} outstanding:",
        "",
        "| p50 ms | p99 ms | max ms | min ms | early (< 0) |",
        "|---:|---:|---:|---:|---:|",
        f"| {late['p50_ms']:.1f} | {late['p99_ms']:.1f} | {late['max_ms']:.1f} "
        f"| {late['min_ms']:.1f} | {late['early']} |",
        "",
        "Details:",
        "",
        f"- seed: sent in {seed['sent_seconds']:.1f}s, all indexed {seed['index_lag_seconds']:.2f}s"
        f" after the last receipt; Redis used_memory {seed['used_memory_before'] / MIB:.1f} -> "
        f"{seed['used_memory_after'] / MIB:.1f} MiB; of which the index zset "
        f"(MEMORY USAGE) {seed['index_key_bytes']:.0f} B per message; gateway RSS "
        f"{seed['gateway_rss_before'] / MIB:.1f} -> {seed['gateway_rss_after'] / MIB:.1f} MiB",
    ]
    if raw:
        out.append(
            f"- raw, entries copied from the gateway's ({raw['entry_bytes']} bytes of field names"
            f" and values): stream {raw['stream_bytes']:.0f} B + PEL {raw['pel_bytes']:.0f} B + "
            f"zset {raw['zset_bytes']:.0f} B per message; XADD {fmt_rate(raw['xadd_rate'])}/s, "
            f"XREADGROUP {fmt_rate(raw['xreadgroup_rate'])}/s, ZADD {fmt_rate(raw['zadd_rate'])}/s"
        )
    out.append(
        f"- lateness messages: sent in {late['send_seconds']:.2f}s; "
        f"{late['due_before_stored']} were due before the last send receipt"
    )
    out.append(
        f"- promotion: first message {promo['first_ms']:.1f} ms after the due time, median "
        f"{promo['p50_ms']:.1f} ms, last {promo['seconds'] * 1000:.0f} ms; early {promo['early']};"
        f" all indexed before due: {'yes' if promo['indexed_before_due'] else 'NO'}"
    )
    out.append(
        f"- far-future messages received (must be 0): {data['far_received']}; index size at "
        f"the end {data['index_after']:,} (expected {n:,})"
    )
    out += [
        "",
        "Where the time goes (CPU, 100% = one core; Redis commands by total time, from "
        "INFO commandstats: EVALSHA is the gateway's scripts, and the commands they call are "
        "counted again under their own names; durations are wall time, so CPU contention "
        "on a shared machine inflates them):",
        "",
        "| section | seconds | gateway CPU | redis CPU | bench process CPU | other CPU "
        f"| Redis commands (calls x µs/call) | longest command ms | Redis commands >= "
        f"{SLOWLOG_US / 1000:g} ms (SLOWLOG: scripts and commands inside them) |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for key, t in timed.items():
        cmds = ", ".join(
            f"{name} {calls:,} x {1e6 * secs / calls:.0f}"
            for name, (calls, secs) in list(t.commands.items())[:5]
        )
        out.append(
            f"| {key} | {t.seconds:.2f} | {t.cpu['gateway']:.0f}% | {t.cpu['redis']:.0f}% "
            f"| {t.cpu['client']:.0f}% | {t.cpu['other']:.0f}% | {cmds} "
            f"| {t.longest_ms:.1f} {t.longest} | {t.slow} |"
        )
    out += ["", f"Runtime: {data['runtime_seconds']:.1f}s"]
    print("\n".join(out), flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_cli(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
